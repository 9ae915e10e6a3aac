"""The core: handlers, the handler pipeline, validation, dispatch with failover, the catalog, generation types and errors. No transport lives here."""
