"""Routing: which models may serve a routed request, and in what order."""
