"""Control flow: cond, while_loop (and loops across devices), TensorArray, functional ops,
py_func, assertions."""
