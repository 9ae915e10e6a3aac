"""The `gateway` command line: serve, keys, migrate."""
