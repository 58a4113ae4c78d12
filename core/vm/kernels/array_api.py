"""GPU kernels from one source: the NumPy kernels, run on CuPy arrays.

Most of tensorvm's kernels are array code that calls ``np.*`` on their inputs. CuPy
implements NumPy's dispatch protocols (NEP 13 ``__array_ufunc__`` and NEP 18
``__array_function__``), so ``np.matmul(a, b)`` on two CuPy arrays runs ``cupy.matmul`` on the
GPU and returns a CuPy array. The only calls that do not dispatch are those with no array
argument — creation (``np.zeros(shape)``, ``np.arange(n)``), conversion (``np.asarray(x)``,
which CuPy refuses) and the host random generators. A kernel that needs one asks for the
namespace of its inputs, ``xp = array_namespace(x)`` (NumPy for host values, CuPy for device
values, as ``cupy.get_array_module``), and creates with ``xp.zeros``. Such a kernel serves
both device types, so the GPU kernel table starts from the CPU one (tinygrad's
``{**base_fxn_for_op, ...}``) and differs only where the two must:

* :data:`CPU_ONLY_FAMILIES` / :data:`CPU_ONLY_OPS` — ops that cannot run on a GPU (string
  tensors, ``py_func``, queues, readers, savers, summaries, map-reduce records) are marked
  :attr:`~tensorvm.framework.op_registry.OpDef.cpu_only` with the reason placement reports;
* :data:`HOST_OPS` — ops whose GPU kernel is their CPU kernel on the host, its outputs
  uploaded (random ops: the host's generator, so a seed draws the same numbers on both
  device types);
* :data:`OVERRIDES` — GPU kernels of their own (``Const`` uploads its value, ``Shape`` keeps
  its value on the host);
* :data:`HOST_MEMORY_INPUTS` / :data:`HOST_MEMORY_OUTPUTS` — inputs a GPU op reads in host
  memory and outputs it makes there (TF's ``HostMemory``: shapes, offsets, counts);
* every other op of a :data:`ONE_SOURCE_FAMILIES` module gets its CPU kernel as its GPU kernel.

Waiting for the device. A GPU queues kernels; the host waits only where it reads a device
value (a copy to the host). The tables above keep such reads off a step's path as TF's
``HostMemory`` registrations do, and what is left is what TF's GPU kernels wait for too: a
fetch, an input of a CPU op, a predicate computed on the device (a loop's or a cond's: TF's
``LoopCond`` and ``Switch`` read ``pred`` in host memory), DynamicPartition's counts (its
output sizes), CheckNumerics' flag. ``tests/test_gpu_waits.py`` counts them per step on the
fake device, and the op sweep's summary lists any other.

Where CuPy's results differ from NumPy's (out-of-bounds indices wrap, duplicate scatter
indices land in no defined order, integer ``x // 0`` is 0, float-to-int casts saturate), the
GPU kernels read indices in host memory and check them there, resolve DynamicStitch's
duplicates there, and otherwise give TF's GPU behaviour: ``tests/test_gpu_semantics.py``
has the table, checked on the fake device (which models each difference) and on CuPy.

An op of a family in neither table (a user's op, a new module) gets no GPU kernel: placement
falls back to CPU, or names it. ``tests/test_gpu.py`` asserts every op tensorvm registers has
a GPU kernel or a CPU-only mark.

The device backend is CuPy, imported on first use (``pip install tensorvm[gpu]``);
:func:`set_device_backend` swaps in another CuPy-compatible module (the tests' fake device,
which keeps arrays on the host but refuses implicit conversion as CuPy does).

>>> import numpy as np
>>> array_namespace(np.ones(2)) is np
True
>>> from tensorvm.framework.op_registry import get_op_def
>>> get_op_def("MatMul").kernels["GPU"] is get_op_def("MatMul").kernels["CPU"]
True
>>> bool(get_op_def("StringJoin").cpu_only)
True
"""
from __future__ import annotations

import functools
import logging
import threading

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import UnavailableError
from ...framework.op_registry import register_kernel, register_op, registry, set_cpu_only

_log = logging.getLogger("tensorvm")

# ---- the device backend (CuPy) ---------------------------------------------------------------
_UNSET = object()
_backend = _UNSET
_backend_lock = threading.Lock()
_HOST_SCALARS = (bool, int, float, complex, str, bytes, np.generic)


def device_backend():
    """The CuPy-compatible module GPU values belong to, or None when CuPy is not installed
    (imported once, on first use)."""
    global _backend
    if _backend is _UNSET:
        with _backend_lock:
            if _backend is _UNSET:
                try:
                    import cupy
                    _backend = cupy
                except Exception as e:  # noqa: BLE001 - ImportError, or a CUDA library error
                    _log.debug("tensorvm: no CuPy (%s): GPU kernels are not available", e)
                    _backend = None
    return _backend


def set_device_backend(module) -> None:
    """Use ``module`` (CuPy-compatible: ``ndarray``, ``asarray``, creation functions) as the
    GPU backend; ``None`` means "none"; the tests pass a fake device here."""
    global _backend
    with _backend_lock:
        _backend = module


def require_backend():
    """The device backend, or :class:`~tensorvm.errors.UnavailableError` with the install hint."""
    b = device_backend()
    if b is None:
        raise UnavailableError("GPU kernels need CuPy: pip install 'tensorvm[gpu]' "
                               "(cupy-cuda12x) on the machines that run GPU devices")
    return b


def gpu_count() -> int:
    """How many GPUs the device backend sees in this process (0 without CuPy or CUDA)."""
    b = device_backend()
    if b is None:
        return 0
    try:
        count = getattr(b, "device_count", None)
        if count is not None:
            return int(count())
        return int(b.cuda.runtime.getDeviceCount())
    except Exception as e:  # noqa: BLE001 - no driver, no device: CuPy raises its own errors
        _log.debug("tensorvm: CuPy sees no GPU (%s)", e)
        return 0


# ---- namespaces and copies -------------------------------------------------------------------
def is_device_array(x) -> bool:
    """Whether ``x`` is an array of the device backend (a CuPy array)."""
    if type(x) is np.ndarray or x is None or isinstance(x, _HOST_SCALARS):
        return False
    b = device_backend()
    return b is not None and isinstance(x, b.ndarray)


def array_namespace(*xs):
    """The array module of ``xs``: the device backend (CuPy) if any of them is a device array,
    else NumPy (``cupy.get_array_module``'s rule). Kernels create arrays with it so that a
    GPU op's outputs stay on the GPU.

    >>> array_namespace(np.ones(2), 3.0) is np
    True
    """
    if len(xs) == 1 and type(xs[0]) is np.ndarray:
        return np  # the CPU path's common case: one host array (no loop, no backend lookup)
    for x in xs:
        if is_device_array(x):
            return device_backend()
    return np


def _is_device_resident(x) -> bool:
    """Whether a host value would go to the device: numbers and booleans do, strings and
    objects stay on the host (TF keeps string tensors in host memory on a GPU too)."""
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    return kind is not None and kind in "biufc"


def to_device(x):
    """Copy a host array (or NumPy scalar) to the device; device arrays, strings, objects and
    Python values are returned unchanged."""
    if (type(x) is np.ndarray or isinstance(x, np.generic)) and _is_device_resident(x):
        return require_backend().asarray(x)
    return x


def to_host(x):
    """Copy a device array to a NumPy array; anything else is returned unchanged."""
    if is_device_array(x):
        return x.get()
    return x


def host_values(values):
    """``to_host`` of each value (for a kernel that reads small tensors such as shapes)."""
    return [to_host(v) for v in values]


def _map_outputs(fn, out):
    if isinstance(out, tuple):
        return tuple(fn(o) for o in out)
    if isinstance(out, list):
        return [fn(o) for o in out]
    return fn(out)


def on_host(kernel, needs_ctx: bool = False):
    """A GPU kernel that runs ``kernel`` on host copies of its inputs and uploads its outputs.
    Slower than a one-source kernel (two copies) but exact: random ops use it so that a seed
    draws the same numbers on a GPU as on a CPU."""
    @functools.wraps(kernel)
    def gpu_kernel(*args, **attrs):
        if needs_ctx:
            args = (args[0],) + tuple(to_host(a) for a in args[1:])
        else:
            args = tuple(to_host(a) for a in args)
        return _map_outputs(to_device, kernel(*args, **attrs))
    gpu_kernel.on_host = True
    return gpu_kernel


# ---- the copy ops partition inserts (TF's _HostSend/_HostRecv, done as explicit copies) -------
COPY_TO_DEVICE = "_CopyHostToDevice"
COPY_TO_HOST = "_CopyDeviceToHost"

register_op(COPY_TO_DEVICE, lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            lambda x: x, differentiable=False, foldable=False)
register_op(COPY_TO_HOST, lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            lambda x: x, differentiable=False, foldable=False)
register_kernel(COPY_TO_DEVICE, "GPU", to_device)
register_kernel(COPY_TO_HOST, "GPU", to_host)


# ---- the GPU kernel table --------------------------------------------------------------------
# Families (the module of an op's CPU kernel) whose kernels are written against the array
# namespace of their inputs: their CPU kernel is their GPU kernel.
ONE_SOURCE_FAMILIES = frozenset({
    "numpy",  # ufuncs registered directly (np.add, np.exp …) dispatch by themselves
    "tensorvm.ops.common", "tensorvm.ops.array.array_ops", "tensorvm.ops.math.math_ops",
    "tensorvm.ops.math.math_ext", "tensorvm.ops.array.manip_ops", "tensorvm.ops.array.slice_ops",
    "tensorvm.ops.array.fill_ops", "tensorvm.ops.array.index_ops", "tensorvm.ops.array.partition_ops",
    "tensorvm.ops.array.sort_ops", "tensorvm.ops.math.linalg_ops", "tensorvm.ops.nn.nn_ops",
    "tensorvm.ops.nn.nn_conv", "tensorvm.ops.nn.nn_norm", "tensorvm.ops.nn.nn_softmax",
    "tensorvm.ops.state.state_ops", "tensorvm.ops.control.control_flow_ops", "tensorvm.ops.control.debug_ops",
    "tensorvm.ops.state.training_ops", "tensorvm.ops.nn.rnn_ops",
    # a loop runs its cond and body programs on its own device (a body op with no GPU kernel
    # keeps the loop on the CPU: placement looks into the body, passes.place)
    "tensorvm.ops.control.while_loop",
    "tensorvm.ops.control.tensor_array_ops",  # elements stay the arrays written (device arrays too)
})

_HOST_IO = "host-only I/O (files and storage are read and written by the host)"
# Families that only the host can run, with the reason placement gives.
CPU_ONLY_FAMILIES = {
    "tensorvm.ops.strings.string_ops": "string tensors live in host memory (pyarrow compute)",
    "tensorvm.ops.readers.parsing_ops": "parses string records in host memory",
    "tensorvm.ops.control.script_ops": "py_func runs a Python function on host values",
    "tensorvm.ops.state.data_flow_ops": "queues hold host values (a resource of the host)",
    "tensorvm.ops.readers.io_ops": "readers: " + _HOST_IO,
    "tensorvm.ops.data.iterator_ops": "tf.data iterators hold host values (a resource of the host)",
    "tensorvm.ops.mapreduce.mapreduce_ops": "map-reduce record batches live in host memory (pyarrow)",
    "tensorvm.ops.mapreduce.mr_values": "map-reduce record batches live in host memory (pyarrow)",
    "tensorvm.tf_api.summary": "summaries are host protocol buffers",
    "tensorvm.train.saver": "savers: " + _HOST_IO,
    "tensorvm.train.input": "input pipelines: " + _HOST_IO,
    "tensorvm.train.tf_input": "input pipelines: " + _HOST_IO,
    "tensorvm.train.sync_replicas": "gradient accumulators are host resources (TF's "
                                    "ConditionalAccumulator is CPU-only too)",
}

# Single ops of one-source families that stay on the host.
CPU_ONLY_OPS = {
    "Assert": "checks and logs on the host (TF's Assert is CPU-only too)",
    "Print": "logs on the host (TF's Print is CPU-only too)",
    "CandidateSampler": "samples with the host's random generator",
}

# Ops whose GPU kernel is their CPU kernel on the host (inputs downloaded, outputs uploaded).
HOST_OPS = frozenset({
    "RandomStandardNormal", "RandomUniform", "TruncatedNormal", "RandomUniformInt",
    "RandomShuffle", "Multinomial",  # the host's generator: same numbers on both devices
    "Eye",  # no input to take a namespace from: made on the host, uploaded (as a Const)
    "Range",  # its inputs are host memory: made on the host, uploaded
})


def _host_const(value) -> bool:
    """A small integer constant (a shape, an offset, an axis) stays in host memory on a GPU
    device, as TF's int32 constants do; GPU ops that compute with it get an upload."""
    return isinstance(value, np.ndarray) and value.dtype.kind in "iu" and value.size <= 64


def _const_gpu(*, value, dtype):
    return value if _host_const(value) else to_device(value)


# GPU kernels of their own.
OVERRIDES = {
    "Const": _const_gpu,  # a constant is uploaded (strings stay on the host)
    # shapes and sizes are made on the host and stay there (HOST_MEMORY_OUTPUTS)
    "Shape": lambda x, out_type=_dt.int32: np.asarray(x.shape, out_type.np_dtype),
    "Size": lambda x, out_type: np.asarray(x.size, out_type.np_dtype),
    "Rank": lambda x: np.asarray(x.ndim, np.int32),
}

# TF's HostMemory: small integer tensors that a GPU op reads as shapes, offsets and counts
# (``Slice``'s begin and size, ``Fill``'s dims...) stay in host memory, so reading them never
# makes the host wait for the GPU's queued kernels; the shapes and sizes a GPU op computes are
# host values too. Partition neither uploads such an input nor, when it comes from a
# host-memory output, downloads it (passes.partition.insert_copies).
HOST_MEMORY_INPUTS = {
    "Slice": (1, 2), "SliceGrad": (2,), "Fill": (0,), "Range": (0, 1, 2),
    "BroadcastTo": (1,), "ScatterNd": (0, 2), "GatherNd": (1,),
    # ids, labels and indices, range-checked on the host and uploaded for the indexing (an
    # embedding lookup, its sparse gradient and update, a sparse cross-entropy's labels)
    "GatherV2": (1,), "UnsortedSegmentSum": (1, 2), "SparseSoftmaxCrossEntropyWithLogits": (0,),
    "GatherDropNegatives": (1,), "ScatterRowsInto": (1,),
    # sorted segment ids (checked increasing and in range, and their last one sizes the
    # output), unsorted ones with their count; a repeat's counts (their sum sizes it)
    "SegmentSum": (1,), "SegmentMean": (1,), "SegmentMax": (1,), "SegmentMin": (1,),
    "SegmentProd": (1,), "UnsortedSegmentMax": (1, 2), "UnsortedSegmentMin": (1, 2),
    "UnsortedSegmentProd": (1, 2), "Repeat": (1,), "RepeatGrad": (2,),
    "TensorScatterUpdate": (1,), "TensorScatterMax": (1,), "TensorScatterMin": (1,),
    "ScatterAdd": (0,), "ScatterSub": (0,), "ScatterUpdate": (0,),
    "Dropout": (1,),  # keep_prob (its mask is drawn on the host and uploaded: nn_ops)
    # the host's generators (HOST_OPS) read their shape and bounds where they run
    "RandomStandardNormal": (0,), "RandomUniform": (0,), "TruncatedNormal": (0,),
    "RandomUniformInt": (0, 1, 2),
    # a TensorArray's size, indices and lengths; a sequence reversal's lengths
    "TensorArrayV3": (0,), "TensorArrayWriteV3": (1,), "TensorArrayReadV3": (1,),
    "TensorArrayGatherV3": (1,), "TensorArrayScatterV3": (1,), "TensorArraySplitV3": (2,),
    "ReverseSequence": (1,),
    "DynamicReshape": (1,),  # the shape (TF's Reshape: HostMemory("shape"))
    "PadDynamic": (1,),  # paddings computed in the graph (TF's Pad: HostMemory("paddings"))
    # the sizes of a depthwise convolution's gradient (TF: HostMemory("input_sizes"),
    # HostMemory("filter_sizes"))
    "DepthwiseConv2dNativeBackpropInput": (0,), "DepthwiseConv2dNativeBackpropFilter": (1,),
    # the same for 3-D convolution and pooling (TF: HostMemory("input_sizes"), ...)
    "Conv3DBackpropInputV2": (0,), "Conv3DBackpropFilterV2": (1,), "AvgPool3DGrad": (0,),
    # fractional pooling's row/column sequences, and its input shape (nn_pool_ext)
    "FractionalMaxPoolGrad": (3, 4), "FractionalAvgPoolGrad": (0, 2, 3),
    # a resize's output size (TF's Resize*: HostMemory("size"))
    "ResizeBilinear": (1,), "ResizeNearestNeighbor": (1,), "ResizeBicubic": (1,),
    "ResizeArea": (1,),
    # a cond's predicate, read by the host to pick a branch (TF's Switch: HostMemory("pred"));
    # one computed on the device is copied there, as in TF
    "Switch": (1,),
}
HOST_MEMORY_OUTPUTS = {"Shape": (0,), "Size": (0,), "Rank": (0,),
                       "FractionalMaxPool": (1, 2), "FractionalAvgPool": (1, 2),  # sequences
                       "Merge": (1,)}  # which input it forwarded (TF: HostMemory("value_index"))

# Ops whose first half of inputs are indices read in host memory: DynamicStitch sizes its
# output by their max and resolves duplicates there, the last one winning (TF's GPU kernel:
# HostMemory("indices"); CuPy's scatter would leave which duplicate lands undefined).
HALF_HOST_INPUTS = frozenset({"DynamicStitch"})

# TF's int32 integer division on a GPU is its CPU kernel with every input and output in host
# memory (cwise_op_floor_div.cc, _floor_mod, _div: ``HostMemory("x").HostMemory("y")
# .HostMemory("z")``), which checks the divisor; other integer types run on the device
# unchecked (their GPU functors divide by zero as CUDA does, undefined), where tensorvm's
# give CuPy's value, 0 (math_ops._check_int_divisor).
INT32_HOST_OPS = frozenset({"FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod", "RealDiv"})


LOOP_OPS = frozenset({"While", "StatelessWhile"})
# Ops whose integer inputs, wherever they sit (their layout varies with a mode), are indices
INT_HOST_INPUTS = frozenset({"TensorArrayGradGather", "TensorArrayGradScatter"})


# Ops whose inputs from this one on are slice bounds (scalar ints, one per dynamic bound), read
# in host memory (TF's StridedSlice: HostMemory("begin"), ("end"), ("strides"))
HOST_MEMORY_FROM = {"StridedSlice": 1, "StridedSliceGrad": 2}

# Inputs read in host memory when an attribute says the input is a shape
SHAPE_ATTR_INPUTS = {"ScatterRowsInto": (2, "like_is_shape")}


def host_memory_input(op_type: str, i: int, in_dtypes=(), attrs=None) -> bool:
    """Whether input ``i`` of an ``op_type`` op on a GPU (with ``in_dtypes`` and ``attrs``) is
    read in host memory: a loop's int32 values (its counters) stay on the host, as TF keeps
    int32; shapes, offsets, indices (:data:`HOST_MEMORY_INPUTS`)."""
    shape_in = SHAPE_ATTR_INPUTS.get(op_type)
    if shape_in is not None and i == shape_in[0]:
        return bool((attrs or {}).get(shape_in[1]))
    if op_type in LOOP_OPS and (attrs or {}).get("has_max") and i == len(in_dtypes) - 1:
        return True  # its maximum_iterations, read by the host that runs the loop
    if op_type in LOOP_OPS or op_type in INT32_HOST_OPS:
        return i < len(in_dtypes) and in_dtypes[i] == _dt.int32
    start = HOST_MEMORY_FROM.get(op_type)
    if start is not None:
        return i >= start
    if op_type in HALF_HOST_INPUTS:
        return i < len(in_dtypes) // 2
    if op_type in INT_HOST_INPUTS:
        return i < len(in_dtypes) and in_dtypes[i] is not None and in_dtypes[i].is_integer
    return i in HOST_MEMORY_INPUTS.get(op_type, ())


def host_memory_output(op_type: str, i: int, attrs=None, out_dtypes=()) -> bool:
    """Whether output ``i`` of an ``op_type`` op (with ``attrs``, ``out_dtypes``) on a GPU is
    made in host memory: shapes and sizes, small integer constants, a loop's int32 values,
    an int32 division's quotient or remainder, a Merge's value index."""
    if op_type == "Const":
        return _host_const((attrs or {}).get("value"))
    if op_type in LOOP_OPS or op_type in INT32_HOST_OPS:
        return i < len(out_dtypes) and out_dtypes[i] == _dt.int32
    return i in HOST_MEMORY_OUTPUTS.get(op_type, ())


def _family(d) -> str | None:
    k = d.kernels.get("CPU")
    return getattr(k, "__module__", None) if k is not None else None


def install() -> int:
    """Give every registered op its GPU kernel or its CPU-only mark, by the tables above; ops
    already decided are left alone. Returns how many ops it decided. Idempotent; runs when
    tensorvm is imported, and again after a module registers more ops."""
    n = 0
    for op_type, d in list(registry.items()):
        if "GPU" in d.kernels or d.cpu_only:
            continue
        fam = _family(d)
        if op_type in CPU_ONLY_OPS:
            set_cpu_only(op_type, CPU_ONLY_OPS[op_type])
        elif op_type in OVERRIDES:
            register_kernel(op_type, "GPU", OVERRIDES[op_type])
        elif op_type in HOST_OPS:
            register_kernel(op_type, "GPU", on_host(d.kernels["CPU"], d.needs_ctx))
        elif fam in CPU_ONLY_FAMILIES:
            set_cpu_only(op_type, CPU_ONLY_FAMILIES[fam])
        elif fam in ONE_SOURCE_FAMILIES:
            register_kernel(op_type, "GPU", d.kernels["CPU"])
        else:
            continue
        n += 1
    return n


def undecided() -> list[str]:
    """tensorvm's own op types (kernels defined in a ``tensorvm`` module) with neither a GPU
    kernel nor a CPU-only mark. A user's op is left out: without a GPU kernel registered for
    it, placement treats it as CPU-only (soft placement moves it, else an error names it)."""
    return sorted(t for t, d in registry.items() if "GPU" not in d.kernels and not d.cpu_only
                  and (_family(d) or "").startswith("tensorvm."))


# Ops that hold a string tensor on a GPU device without computing on it (TF's HostMemory
# kernels): the string stays a host value and passes through. Any other op that takes or makes
# a string tensor has no GPU kernel for it (TF registers GPU kernels for numeric types only).
STRING_PASS_THROUGH = frozenset({
    "Const", "Identity", "StopGradient", "Switch", "Merge", "Placeholder",
    "PlaceholderWithDefault",
})


# Variables whose dtype TF registers no GPU kernel for (variable_ops.cc: int64, uint32 and
# the floating/complex/bool types): an int32 variable lives on the host, with its updates
# (TF1's global steps and counters; soft placement moves them, else an error names them)
VARIABLE_OPS = frozenset({"VariableV2"})
NO_GPU_VARIABLE_DTYPES = frozenset({"int32", "int8", "int16", "uint8", "uint16"})


def string_tensor_reason(op_type: str, in_dtypes, out_dtypes) -> str | None:
    """Why an ``op_type`` op with these input and output dtypes cannot run on a GPU because of
    a string tensor (or, for a variable, a dtype TF keeps on the host), or None."""
    if op_type in VARIABLE_OPS:
        for d in out_dtypes:
            if d is not None and d.name in NO_GPU_VARIABLE_DTYPES:
                return (f"no GPU kernel for {op_type} of {d.name} (TF registers {d.name} "
                        f"variables on the CPU only: their values stay in host memory)")
    if op_type in STRING_PASS_THROUGH:
        return None
    for d in (*in_dtypes, *out_dtypes):
        if d == _dt.string:  # not a loop's tape (a Python object too, on any device)
            return f"no GPU kernel for {op_type} on string tensors: strings live in host memory"
    return None


def dtype_on_device(dtype: _dt.DType) -> bool:
    """Whether values of ``dtype`` live on the device on a GPU (strings stay on the host)."""
    return not dtype.is_string
