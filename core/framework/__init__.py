"""The graph IR, a leaf: graphs, operations and tensors, the op table, dtypes, errors, device
strings, tensor conversion and the plain-data snapshot the step passes read."""
