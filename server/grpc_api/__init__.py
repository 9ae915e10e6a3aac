"""The gRPC transport: the servicer that serves the RPC table, and rich status details."""
