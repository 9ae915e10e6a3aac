"""The floor: the vocabulary every layer speaks (errors, config, the call and its record,
the pipeline's types, generation and embedding types with the provider protocols,
metering, the tracing hook, log throttling). It imports nothing else of `server`."""
