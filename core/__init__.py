"""tensorvm — TensorFlow 1.x-style dataflow graphs run as a distributed virtual machine on Dask.

>>> import tensorvm as tv
>>> x = tv.placeholder(tv.float32, [None, 3])
>>> y = tv.reduce_sum(x * 2.0)
>>> with tv.Session() as sess:
...     float(sess.run(y, {x: [[1, 2, 3]]}))
12.0
"""
from __future__ import annotations

# ruff: noqa: F401  (this module re-exports the public API)

from . import app, compat, dtypes, errors
from .app import flags
from .device_spec import DeviceSpec
from .dtypes import (DType, as_dtype, bool_ as bool, complex64, complex128, float16, float32,
                     float64, int8, int16, int32, int64, string, uint8, uint16, uint32, uint64)
from .graph import (Graph, Operation, Tensor, TensorShape, colocate_with, control_dependencies,
                    device, get_default_graph, name_scope, reset_default_graph,
                    set_random_seed)
from .registry import register_gradient
from .tensor_conversion import convert_to_tensor
from .ops import *  # noqa: F401,F403  (the op functions: tv.matmul, tv.reduce_sum, …)
from .ops import nn, strings  # noqa: F401
from .gradients import gradients  # noqa: F401
from .indexed_slices import IndexedSlices, IndexedSlicesValue  # noqa: F401
from .ops.index_ops import densify  # noqa: F401
from .variables import (Variable, assign, assign_add, assign_sub, global_variables,  # noqa
                        global_variables_initializer, initialize_variables, scatter_add,
                        scatter_sub, scatter_update, trainable_variables,
                        variables_initializer)
from .session import (ConfigProto, InteractiveSession, RunMetadata, RunOptions,  # noqa: F401
                      Session, get_default_session)
from .config_options import GPUOptions, GraphOptions, OptimizerOptions  # noqa: F401
from . import train  # noqa: F401,E402
from .job_api import job  # noqa: F401,E402  (@tv.job: a batch job for the tensorvm CLI)
from .ops import debug_ops as debugging  # noqa: E402  (tv.debugging.check_numerics)
from .ops.debug_ops import add_check_numerics_ops, check_numerics  # noqa: E402

newaxis = None
__version__ = "0.1.0"

# TF 1.x API surface (issue 14): collections, initializers, variable scopes, compat.
from .graph_keys import *  # noqa: E402,F403
from .init_ops import *  # noqa: E402,F403
from .variable_scope import *  # noqa: E402,F403
from .compat import (disable_eager_execution, disable_v2_behavior,  # noqa: E402
                     enable_eager_execution, executing_eagerly)
from . import layers, losses  # noqa: E402  (tv.layers, tv.losses)
from . import summary  # noqa: E402  (tv.summary)
from . import contrib  # noqa: E402  (tv.contrib.rnn, tv.contrib.layers)
from .node_def import NodeDef  # noqa: E402  (op.node_def, for TF 1.x device functions)
from . import metrics  # noqa: E402  (tv.metrics.accuracy, tv.metrics.mean)
from . import tf_logging as logging  # noqa: E402  (tv.logging: TF 1.x's tf.logging)
from . import gfile  # noqa: E402  (tv.gfile, tv.io.gfile: TF's file API on fsspec)
io.gfile = gfile.io_gfile  # noqa: F405
from . import random_api as random  # noqa: E402  (tv.random: tf.random.normal ...)
from .summary import Event, Summary  # noqa: E402  (tf.Summary(value=[...]) protos)
from . import data  # noqa: E402  (tv.data: TF 1.x's tf.data)
from . import estimator  # noqa: E402  (tv.estimator: TF 1.x's tf.estimator)
from .estimator import feature_column  # noqa: E402  (tv.feature_column)
from .ops.tensor_array import TensorArray  # noqa: E402,F401  (tf.TensorArray)
from . import image  # noqa: E402  (tv.image: TF 1.x's tf.image)
from .image import random_crop  # noqa: E402,F401  (tf.random_crop)
for _name in ("decode_image", "decode_png", "decode_jpeg", "decode_bmp", "decode_gif",  # tf.io
              "encode_png", "encode_jpeg", "extract_jpeg_shape"):
    setattr(io, _name, getattr(image, _name))  # noqa: F405
io.read_file, io.write_file, io.matching_files = read_file, write_file, matching_files  # noqa
from . import sparse  # noqa: E402  (tv.sparse: TF 1.x's tf.sparse)
for _name in sparse.TOP_LEVEL:  # tv.sparse_tensor_to_dense, tv.sparse_placeholder …
    globals()[_name] = getattr(sparse, _name)
from . import lookup  # noqa: E402  (tv.lookup: TF 1.x's tf.lookup and tf.contrib.lookup)
tables_initializer = initialize_all_tables = lookup.tables_initializer  # noqa: E402
from .framework_api import (NotDifferentiable, RegisterGradient,  # noqa: E402,F401
                            custom_gradient, make_template, no_gradient, py_function)
from .framework_api import print_ as print  # noqa: E402,F401,A001  (tf.print)
from .variables import (assert_variables_initialized, count_up_to,  # noqa: E402,F401
                        report_uninitialized_variables)
from .tf_misc import *  # noqa: E402,F401,F403  (versions, tf.half/double, shape helpers …)
from .variables import (scatter_div, scatter_max, scatter_min, scatter_mul,  # noqa: E402,F401
                        scatter_nd_add, scatter_nd_sub, scatter_nd_update)
from .gradients import AggregationMethod, UnconnectedGradients  # noqa: E402,F401
from .summary import SessionLog  # noqa: E402,F401
from . import kernels_gpu as _kernels_gpu  # noqa: E402
_kernels_gpu.install()  # every op registered above: its GPU kernel or its CPU-only mark
from . import math_api as math  # noqa: E402  (tv.math: TF's tf.math names)
from .math_api import accumulate_n, confusion_matrix  # noqa: E402,F401  (tf.confusion_matrix)
