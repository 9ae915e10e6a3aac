"""The shared generation pipeline every dialect runs on: admission to a run
(`generations`), the run itself (`engine`, `dispatch`, `breaker`), what it runs on (the
`catalog` in one `state` snapshot), and what it keeps (`response_cache`, `affinity`)."""
