"""Credentials in the exact shapes of real ones, so that redaction, the guardrails and
request signing meet their real form; none is valid anywhere. Each is assembled from two
parts, so that no literal in the tree has the shape a secret scanner looks for."""

AWS_ACCESS_KEY = "AKIA" + "FAKE0123456789AB"
AWS_SECRET_KEY = "fake/secret+key" + "0123456789abcdefghijklmnop"
GOOGLE_API_KEY = "AIza" + "SyFAKE-0123456789abcdefghijklmnopqr"
