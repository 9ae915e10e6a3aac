"""Upstream MCP servers built with the official SDK, for the MCP gateway's tests."""
