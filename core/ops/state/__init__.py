"""State: variables and their ops, initializers, variable scopes and partitioners, fused
optimizer updates, queues."""
