"""Fake upstream servers speaking each provider's public wire format, on loopback."""
