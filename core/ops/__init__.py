"""The op library: one folder per kind of op, one module per family. Each family's
``__all__`` (the modules in ``_FAMILIES`` below) is re-exported as ``tv.*``; a family keeps an
op's kernel, shape rule and gradient together, registered in the op table
(:mod:`tensorvm.framework.op_registry`) when the module is imported.

- ``array/``: constants, placeholders and shapes (array_ops), concat/split/transpose
  (manip_ops), slicing (slice_ops), zeros/eye/range (fill_ops), gather (gather_ops), segment
  sums (segment_ops), scatter (tensor_scatter_ops), roll/repeat/space-to-depth
  (rearrange_ops), partitioning and masks (partition_ops), sort/top_k/unique (sort_ops),
  sparse kernels; index_ops re-exports the indexing families.
- ``math/``: arithmetic, matmul and reductions (math_ops; math_ext re-exports
  elementwise_ops, select_ops, reduction_ops, grid_ops, histogram_ops), linear algebra
  (linalg_ops over matrix_ops, decomposition_ops, solve_ops, einsum_ops, norm_ops,
  matrix_functions), special functions (special_ops over erf_ops, gamma_ops, bessel_ops,
  complex_ops, fft_ops, signal_ops), random_ops, clip_ops.
- ``nn/`` (its package is the ``tv.nn`` namespace): activations, convolutions, pooling,
  normalisation, softmax and cross-entropies, CTC, samplers.
- ``strings/`` (the ``tv.strings`` namespace): string_ops, string_ext_ops.
- ``control/``: cond and case (control_flow_ops), ``while_loop`` (and loops across devices:
  while_frames, while_pipeline), TensorArray, map_fn/foldl/scan (functional_ops), ``py_func``
  (script_ops), assertions and ``tv.debugging`` (debug_ops).
- ``state/``: Variable (variables), get_variable and scopes (variable_scope), initializers
  (init_ops), partitioners, variable ops (state_ops), fused optimizer updates (training_ops),
  queues (data_flow_ops).
- ``readers/``: TF 1.x readers (io_ops), whole files (file_ops), parsing (parsing_ops).
- ``image/``: resizing and colour kernels, boxes, codecs (``tv.image`` itself is in tf_api).
- ``data/``: ``tf.data`` — Dataset (graph side), its pipeline stages, the iterator op.
- ``mapreduce/``: the map-reduce ops and the values they carry.
- ``gradients.py`` (``tv.gradients``), ``common.py`` (the helpers every family shares),
  ``deprecated_ops.py`` (TF 1.x's old spellings).
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
