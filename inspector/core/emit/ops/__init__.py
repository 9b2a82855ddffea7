"""One module per op family; each registers its ops in registry.OPS with their layout category and emitter."""
