"""Kernel namespaces: the array API (NumPy or CuPy) every op kernel is written against, the
optional PyTorch CPU kernels, and the BLAS thread budget per executing thread."""
