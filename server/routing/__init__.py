"""Routing: which models may serve a routed request, in what order, and how hard its prompt is."""
