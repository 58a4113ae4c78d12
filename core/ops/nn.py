"""``tv.nn``: neural-network ops (defined in nn_ops) under TensorFlow's names, resolved on
first use so that importing tensorvm stays cheap."""
import importlib as _importlib


def __getattr__(name):
    mod = _importlib.import_module("tensorvm.ops.nn_ops")
    if name in getattr(mod, "NN_ALL", ()):
        return getattr(mod, name)
    raise AttributeError(f"module 'tensorvm.nn' has no attribute {name!r}")


def __dir__():
    mod = _importlib.import_module("tensorvm.ops.nn_ops")
    return sorted(getattr(mod, "NN_ALL", ()))
