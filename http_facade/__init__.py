"""The REST/SSE facade over the gateway's RPCs."""
