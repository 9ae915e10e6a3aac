"""The gateway: a transport-neutral core and its gRPC server."""
