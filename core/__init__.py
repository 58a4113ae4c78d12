"""tensorvm — TensorFlow 1.x-style dataflow graphs run as a distributed virtual machine on Dask.

Where things are. A program builds a graph in ``framework/`` (``Graph``, ``Operation``,
``Tensor``, the op table ``op_registry``, dtypes, errors, device strings) by calling the op
functions of ``ops/`` (one folder per family: ``array/``, ``math/``, ``nn/``, ``control/``,
``state/`` …; each op's kernel, shape rule and gradient sit together). ``Session.run``
(``runtime/session.py``) snapshots the graph and sends it through ``passes/`` — prune, optimise,
place, partition, compile — each a pure function, ending in a plan (``vm/program.py``: tasks,
sends, feeds). The plan runs on one of three planes, all through the one interpreter
(``vm/interpreter.py``) with resources (variables, queues) kept per device: in process
(``runtime/backends.py``), as a Dask task graph (``runtime/dask_plane.py``), or registered once
on the workers and run by one message per step (``runtime/direct/``); ``runtime/cluster/`` maps
a ``ClusterSpec``'s tasks onto Dask workers. Above the runtime: ``tf_api/`` (the TF 1.x surface:
layers, losses, metrics, tf.image, summaries …), ``train/`` (optimizers, Saver, PS training) and
``estimator/``. An import never runs up this list (``python -m tensorvm.tools.imports --layers``);
the old flat module paths keep importing through ``_aliases``. ``import tensorvm`` (in every
Dask worker and CLI command) leaves ``tv.train``, ``tv.estimator``, ``tv.feature_column``,
``tv.data``, ``tv.app`` and ``tv.flags`` to load on first use (``_LAZY`` below); an op type of
theirs met first in a plan or a GraphDef loads them then (``op_registry.load_all_ops``).

>>> import tensorvm as tv
>>> x = tv.placeholder(tv.float32, [None, 3])
>>> y = tv.reduce_sum(x * 2.0)
>>> with tv.Session() as sess:
...     float(sess.run(y, {x: [[1, 2, 3]]}))
12.0
"""
from __future__ import annotations

import importlib as _importlib
import threading as _threading

from . import _aliases

_aliases.install()  # the module paths before core/ was laid out by layer keep importing

# Names loaded on first use (PEP 562): ``import tensorvm`` — in every Dask worker, every CLI
# command — leaves out the upper layers most steps never touch. name -> (module, attribute;
# None: the module itself). A function or class of these pickles by reference as before.
_LAZY = {
    "train": ("tensorvm.train", None),
    "estimator": ("tensorvm.estimator", None),
    "feature_column": ("tensorvm.estimator.feature_column", None),
    "data": ("tensorvm.tf_api.data", None),
    "app": ("tensorvm.tf_api.app", None),
    "flags": ("tensorvm.tf_api.app", "flags"),
}
# The lazy modules that register ops (a plan unpickled in a worker may hold their ops).
_LAZY_OPS = ("tensorvm.train", "tensorvm.tf_api.data")
_install_lock = _threading.Lock()
_ops_loaded = False


def _install_gpu_kernels() -> None:
    from .vm.kernels import array_api
    with _install_lock:  # two threads' installs would both register one op's GPU kernel
        array_api.install()


def _load_ops() -> None:
    """Import the lazy modules that register ops, then give their ops GPU kernels: the op
    table as a full ``import tensorvm`` made it (run by
    :func:`~tensorvm.framework.op_registry.load_all_ops` where an op type is missing)."""
    global _ops_loaded
    if _ops_loaded:
        return
    for module in _LAZY_OPS:
        _importlib.import_module(module)
    _install_gpu_kernels()
    _ops_loaded = True


def __getattr__(name: str):
    lazy = _LAZY.get(name)
    if lazy is not None:
        value = _importlib.import_module(lazy[0])
        if lazy[1] is not None:
            value = getattr(value, lazy[1])
        _install_gpu_kernels()  # any op it registered gets its GPU kernel (idempotent, cheap)
        globals()[name] = value
        return value
    # ``tv.session``, ``tv.registry`` … (a module that moved, reached as an attribute)
    module = _aliases.moved_module(name)
    if module is None:
        raise AttributeError(f"module 'tensorvm' has no attribute {name!r}")
    return module


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

# ruff: noqa: F401  (this module re-exports the public API)

from .tf_api import compat
from .framework import dtypes, errors
from .framework.device_spec import DeviceSpec
from .framework.dtypes import (DType, as_dtype, bool_ as bool, complex64, complex128, float16,
                               float32, float64, int8, int16, int32, int64, string, uint8, uint16,
                               uint32, uint64)
from .framework.graph import (Graph, Operation, Tensor, TensorShape, colocate_with,
                              control_dependencies, device, get_default_graph, name_scope,
                              reset_default_graph, set_random_seed)
from .framework.op_registry import register_gradient
from .framework.tensor_conversion import convert_to_tensor
from .ops import *  # noqa: F401,F403  (the op functions: tv.matmul, tv.reduce_sum, …)
from .ops import nn, strings  # noqa: F401
from .ops.gradients import gradients  # noqa: F401
from .framework.indexed_slices import IndexedSlices, IndexedSlicesValue  # noqa: F401
from .ops.array.index_ops import densify  # noqa: F401
from .ops.state.variables import (Variable, all_variables, assign, assign_add, assign_sub,
                                  global_variables, global_variables_initializer,
                                  initialize_all_variables, initialize_local_variables,
                                  initialize_variables, local_variables_initializer, scatter_add,
                                  scatter_sub, scatter_update, trainable_variables,
                                  variables_initializer)  # noqa
from .runtime.session import (ConfigProto, InteractiveSession, RunMetadata, RunOptions, Session,
                              get_default_session)  # noqa: F401
from .runtime.config_options import GPUOptions, GraphOptions, OptimizerOptions  # noqa: F401
from .runtime.job_api import job  # noqa: F401,E402  (@tv.job: a batch job for the tensorvm CLI)
from .ops.control import debug_ops as debugging  # noqa: E402  (tv.debugging.check_numerics)
from .ops.control.debug_ops import add_check_numerics_ops, check_numerics  # noqa: E402

newaxis = None
from .framework.versions import __version__  # noqa: E402,F401

# TF 1.x API surface (issue 14): collections, initializers, variable scopes, compat.
from .framework.graph_keys import *  # noqa: E402,F403
from .ops.state.init_ops import *  # noqa: E402,F403
from .ops.state.variable_scope import *  # noqa: E402,F403
from .tf_api.compat import (disable_eager_execution, disable_v2_behavior,  # noqa: E402
                     enable_eager_execution, executing_eagerly)
from .tf_api import layers, losses  # noqa: E402  (tv.layers, tv.losses)
from .tf_api import summary  # noqa: E402  (tv.summary)
from .tf_api import contrib  # noqa: E402  (tv.contrib.rnn, tv.contrib.layers)
from .framework.node_def import NodeDef  # noqa: E402  (op.node_def, for TF 1.x device functions)
from .tf_api import metrics  # noqa: E402  (tv.metrics.accuracy, tv.metrics.mean)
from .tf_api import tf_logging as logging  # noqa: E402  (tv.logging: TF 1.x's tf.logging)
from .tf_api import gfile  # noqa: E402  (tv.gfile, tv.io.gfile: TF's file API on fsspec)
io.gfile = gfile.io_gfile  # noqa: F405
from .tf_api import random_api as random  # noqa: E402  (tv.random: tf.random.normal ...)
from .tf_api.summary import Event, Summary  # noqa: E402  (tf.Summary(value=[...]) protos)
from .ops.control.tensor_array import TensorArray  # noqa: E402,F401  (tf.TensorArray)
from .tf_api import image  # noqa: E402  (tv.image: TF 1.x's tf.image)
from .tf_api.image import random_crop  # noqa: E402,F401  (tf.random_crop)
for _name in ("decode_image", "decode_png", "decode_jpeg", "decode_bmp", "decode_gif",  # tf.io
              "encode_png", "encode_jpeg", "extract_jpeg_shape"):
    setattr(io, _name, getattr(image, _name))  # noqa: F405
io.read_file, io.write_file, io.matching_files = read_file, write_file, matching_files  # noqa
from .tf_api import sparse  # noqa: E402  (tv.sparse: TF 1.x's tf.sparse)
for _name in sparse.TOP_LEVEL:  # tv.sparse_tensor_to_dense, tv.sparse_placeholder …
    globals()[_name] = getattr(sparse, _name)
from .tf_api import lookup  # noqa: E402  (tv.lookup: TF 1.x's tf.lookup and tf.contrib.lookup)
tables_initializer = initialize_all_tables = lookup.tables_initializer  # noqa: E402
from .tf_api.framework_api import (NotDifferentiable, RegisterGradient,  # noqa: E402,F401
                            custom_gradient, make_template, no_gradient, py_function)
from .tf_api.framework_api import print_ as print  # noqa: E402,F401,A001  (tf.print)
from .ops.state.variables import (assert_variables_initialized, count_up_to,  # noqa: E402,F401
                        report_uninitialized_variables)
from .tf_api.tf_misc import *  # noqa: E402,F401,F403  (versions, tf.half/double, shape helpers …)
from .ops.state.variables import (scatter_div, scatter_max, scatter_min, scatter_mul,
                                  scatter_nd_add, scatter_nd_sub, scatter_nd_update)  # noqa: E402,F401
from .ops.gradients import AggregationMethod, UnconnectedGradients  # noqa: E402,F401
from .tf_api.summary import SessionLog  # noqa: E402,F401
_install_gpu_kernels()  # every op registered above: its GPU kernel or its CPU-only mark
from .tf_api import math_api as math  # noqa: E402  (tv.math: TF's tf.math names)
from .tf_api.math_api import (accumulate_n, confusion_matrix)  # noqa: E402,F401  (tf.confusion_matrix)

from .framework import op_registry as _op_registry  # noqa: E402

_op_registry.add_op_loader(_load_ops)
# ``from tensorvm import *``: every public name, the lazy ones too (the star import loads them)
__all__ = sorted({n for n in globals() if not n.startswith("_")} | set(_LAZY))
