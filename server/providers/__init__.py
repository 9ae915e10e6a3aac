"""Upstream provider adapters, one module per wire format."""
