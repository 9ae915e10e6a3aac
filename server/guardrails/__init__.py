"""Guardrails: personal data and secrets found in what models read and write, redacted, blocked or logged (docs/guardrails.md)."""
