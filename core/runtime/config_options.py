"""The option messages of TF 1.x's ``ConfigProto``: ``tv.GPUOptions``, ``tv.GraphOptions``,
``tv.OptimizerOptions``.

TF 1.x programs set them on every session (``config.gpu_options.allow_growth = True``,
``config.graph_options.optimizer_options.global_jit_level = tf.OptimizerOptions.ON_1``); a
``ConfigProto`` has a fresh one of each, as a protobuf message has. tensorvm accepts and keeps
every field; none changes how it runs (GPU memory is CuPy's pool, and tensorvm's own graph
passes always run; there is no XLA).

>>> import tensorvm as tv
>>> config = tv.ConfigProto()
>>> config.gpu_options.allow_growth = True
>>> config.graph_options.optimizer_options.global_jit_level = tv.OptimizerOptions.ON_1
>>> config.gpu_options
GPUOptions(allow_growth=True)
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

__all__ = ["GPUOptions", "GraphOptions", "OptimizerOptions"]


class _Message:
    def __repr__(self):
        default = type(self)()
        changed = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                   if getattr(self, f.name) != getattr(default, f.name)]
        return f"{type(self).__name__}({', '.join(changed)})"


@dataclass(repr=False)
class GPUOptions(_Message):
    """TF's ``GPUOptions`` (kept, no effect: tensorvm's GPU memory is CuPy's pool)."""
    per_process_gpu_memory_fraction: float = 0.0
    allow_growth: bool = False
    allocator_type: str = ""
    deferred_deletion_bytes: int = 0
    visible_device_list: str = ""
    polling_active_delay_usecs: int = 0
    polling_inactive_delay_msecs: int = 0
    force_gpu_compatible: bool = False
    experimental: object = None


@dataclass(repr=False)
class OptimizerOptions(_Message):
    """TF's ``OptimizerOptions`` (kept, no effect: tensorvm's passes always run; no XLA)."""
    L1 = 0  # opt_level
    L0 = -1
    DEFAULT = 0  # global_jit_level
    OFF = -1
    ON_1 = 1
    ON_2 = 2
    do_common_subexpression_elimination: bool = False
    do_constant_folding: bool = False
    max_folded_constant_in_bytes: int = 0
    do_function_inlining: bool = False
    opt_level: int = 0
    global_jit_level: int = 0


@dataclass(repr=False)
class GraphOptions(_Message):
    """TF's ``GraphOptions`` (kept, no effect)."""
    enable_recv_scheduling: bool = False
    optimizer_options: OptimizerOptions = field(default_factory=OptimizerOptions)
    build_cost_model: int = 0
    build_cost_model_after: int = 0
    infer_shapes: bool = False
    place_pruned_graph: bool = False
    enable_bfloat16_sendrecv: bool = False
    timeline_step: int = 0
    rewrite_options: object = None
