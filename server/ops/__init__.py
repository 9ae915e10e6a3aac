"""Operability: metrics, request logs, tracing and readiness."""
