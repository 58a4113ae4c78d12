"""The op library, one module per family. Each module's ``__all__`` is re-exported as ``tv.*``.

Modules: array_ops (constants, placeholders, shapes), manip_ops (concat, split, transpose …),
slice_ops (slicing, ``t[...]``), fill_ops (zeros, eye, range), index_ops (gather, scatter,
segment sums), partition_ops (dynamic_partition, boolean_mask, one_hot), sort_ops (sort,
top_k, unique); common holds the helpers every family shares,
math_ops (arithmetic, matmul, reductions), math_ext (comparisons, logic, more element-wise math,
more reductions), linalg_ops, nn_ops (``tv.nn``), random_ops, string_ops, script_ops
(``tv.py_func``), state_ops (variables), data_flow_ops (queues), io_ops (TF readers,
``tv.python_io``), parsing_ops (decode_csv, decode_raw, parse_example), rnn_ops
(reverse_sequence, sequence_mask), clip_ops (clip_by_norm, clip_by_global_norm …),
functional_ops (map_fn, foldl, foldr, scan), debug_ops (assertions, ``tv.debugging``),
special_ops (inverse trig, erf, lgamma, digamma, zeta, Bessel, complex numbers, FFTs,
``tv.signal``).
"""
import importlib as _importlib

__all__: list[str] = []
_FAMILIES = ["array.array_ops", "math.math_ops", "array.manip_ops", "array.slice_ops",
             "array.fill_ops", "array.index_ops", "array.partition_ops", "array.sort_ops",
             "math.math_ext", "math.linalg_ops", "nn.nn_ops", "math.random_ops",
             "strings.string_ops", "control.script_ops", "state.state_ops",
             "state.data_flow_ops", "mapreduce.mapreduce_ops", "deprecated_ops", "nn.nn_norm",
             "nn.nn_sampled", "readers.io_ops", "readers.parsing_ops", "control.control_flow_ops",
             "nn.rnn_ops", "math.clip_ops", "control.functional_ops", "readers.file_ops",
             "control.debug_ops", "math.special_ops", "strings.string_ext_ops"]

for _name in _FAMILIES:
    _mod = _importlib.import_module(f"{__name__}.{_name}")
    for _sym in getattr(_mod, "__all__", []):
        globals()[_sym] = getattr(_mod, _sym)
        __all__.append(_sym)

from . import nn  # noqa: E402,F401


def __getattr__(name: str):
    # ``tv.ops.math_ops`` … (an op family module that moved into a family folder)
    from .. import _aliases
    module = _aliases.moved_module(f"ops.{name}")
    if module is None:
        raise AttributeError(f"module 'tensorvm.ops' has no attribute {name!r}")
    return module
