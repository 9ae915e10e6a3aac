"""The MCP gateway's core, whichever transport reaches it (`/mcp`, McpService, a model
call's tool loop): the upstream servers a config names (toolbox), which tools a key
may use (grants), and listing and calling them with every call admitted, priced,
counted and written to the ledger (tools)."""
