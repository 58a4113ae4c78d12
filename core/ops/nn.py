"""``tv.nn``: neural-network ops (defined in nn_ops) under TensorFlow's names."""
from . import nn_ops as _nn_ops

for _sym in getattr(_nn_ops, "NN_ALL", []):
    globals()[_sym] = getattr(_nn_ops, _sym)
