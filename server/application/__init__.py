"""The application: one handler module per contract service, the RPC table, the catalog,
dispatch with failover, the engine, live control and the admin page's data. No
transport lives here."""
