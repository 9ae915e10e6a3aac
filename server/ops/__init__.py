"""Operability: metrics, request logs, tracing, health, live configuration, admin page."""
