"""The array namespace every kernel computes with (NumPy on a CPU, CuPy on a GPU), and the
GPU kernels it gives tensorvm's ops from their CPU kernels.

Every op module imports this layer: :func:`array_namespace` (which module the inputs belong
to), :func:`to_host` / :func:`to_device` (copies), :func:`device_backend` (CuPy, imported on
first use). Most of tensorvm's kernels are array code that calls ``np.*`` on their inputs.
CuPy implements NumPy's dispatch protocols (NEP 13 ``__array_ufunc__`` and NEP 18
``__array_function__``), so ``np.matmul(a, b)`` on two CuPy arrays runs ``cupy.matmul`` on the
GPU and returns a CuPy array. The only calls that do not dispatch are those with no array
argument — creation (``np.zeros(shape)``, ``np.arange(n)``), conversion (``np.asarray(x)``,
which CuPy refuses) and the host random generators. A kernel that needs one asks for the
namespace of its inputs, ``xp = array_namespace(x)`` (NumPy for host values, CuPy for device
values, as ``cupy.get_array_module``), and creates with ``xp.zeros``. Such a kernel serves
both device types, so the GPU kernel table starts from the CPU one (tinygrad's
``{**base_fxn_for_op, ...}``) and differs only where the two must. How an op runs on a GPU is
a fact of its :class:`~tensorvm.framework.op_registry.OpDef`, given where the op is registered
or declared here per family by op name (:func:`~tensorvm.framework.op_registry.declare_gpu`);
:func:`install` reads the facts:

* ``OpDef.gpu == "same"`` — the CPU kernel is the GPU kernel (one source);
* ``OpDef.gpu == "host"`` — the GPU kernel is the CPU kernel on the host, its outputs
  uploaded (random ops: the host's generator, so a seed draws the same numbers on both
  device types);
* ``OpDef.cpu_only`` — no GPU kernel (string tensors, ``py_func``, queues, readers, savers,
  summaries, map-reduce records), with the reason placement reports;
* :data:`OVERRIDES` — GPU kernels of their own (``Const`` uploads its value, ``Shape`` keeps
  its value on the host);
* :data:`HOST_MEMORY_INPUTS` / :data:`HOST_MEMORY_OUTPUTS` — inputs a GPU op reads in host
  memory and outputs it makes there (TF's ``HostMemory``: shapes, offsets, counts).

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

An op that declares none of these (a user's op, a new one) gets no GPU kernel: placement
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
>>> bool(get_op_def("StringJoin").cpu_only), get_op_def("RandomUniform").gpu
(True, 'host')
"""
from __future__ import annotations

import functools
import logging
import threading

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import UnavailableError
from ...framework.op_registry import declare_gpu, register_kernel, register_op, registry

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


# ---- how each family's ops run on a GPU: facts of their OpDefs, declared by op name ----------
# An op's GPU facts are OpDef fields (op_registry: ``gpu``, ``cpu_only``), given where the op
# is registered or declared here, per family, for the ops each family names; install() reads
# them. A name here that no module registers is an error (tests/test_gpu.py checks).

# Ops whose CPU kernel is written against the array namespace of its inputs (NumPy's ufuncs
# dispatch by themselves): their CPU kernel is their GPU kernel.
_SAME = {
    "array": """BroadcastLike DynamicReshape Identity NoOp OnesLike Pack Placeholder
        PlaceholderWithDefault Reshape ReshapeLike StopGradient ZerosLike Fill
        BroadcastTo ConcatV2 ExpandDims MirrorPad MirrorPadGrad Pad PadDynamic ReverseV2 Split
        SplitLike SplitV Squeeze Tile TileGrad Transpose Unpack
        Slice SliceGrad StridedSlice StridedSliceGrad
        Argsort PutAlongAxis TakeAlongAxis TopKV2 Unique UniqueWithCounts
        BooleanMask BooleanMaskGrad DynamicPartition DynamicPartitionGrad DynamicStitch OneHot
        BatchToSpaceND Bincount DepthToSpace FlattenLeading GatherDropNegatives GatherGrad
        GatherNd GatherV2 InvertPermutation ListDiff Repeat RepeatGrad Roll ScatterNd
        ScatterRowsInto SearchSorted SegmentMax SegmentMean SegmentMin SegmentSum SpaceToBatchND
        SpaceToDepth TensorScatterMax TensorScatterMin TensorScatterUpdate UnravelIndex
        UnsortedSegmentMax UnsortedSegmentMin UnsortedSegmentSum""",
    "math": """Abs Add Ceil Cos Exp Expm1 Floor IsFinite IsInf IsNan Log Log1p LogicalNot Maximum
        Minimum Mul Neg Pow Reciprocal Round Sign Sin Sqrt Square Sub Tan Tanh SumToShapeOf
        AddN Cast ExpandReduced FloorDiv FloorMod MatMul Mean RealDiv ReducedSize Sum TruncateDiv
        TruncateMod All Any ArgMax ArgMin ComplexAbs Cumprod Cumsum DivNoNan Equal Greater
        GreaterEqual HistogramFixedWidth HistogramFixedWidthBins Less LessEqual LogicalAnd
        LogicalOr LogicalXor Max Min NotEqual Prod ProdOthers ReduceLogSumExp Rsqrt Select
        SelectV2 Sigmoid SigmoidGrad SquaredDifference TanhGrad Where
        Cholesky Cross Diag DiagPart Einsum ExpmFrechet LogMatrixDeterminant Lu MatrixBandPart
        MatrixDeterminant MatrixDiag MatrixDiagPart MatrixExponential MatrixInverse
        MatrixSetDiag MatrixSolve MatrixSquareRoot MatrixSquareRootGrad MatrixTranspose
        MatrixTriangularSolve Qr SelfAdjointEigV2 Svd""",
    "nn": """AvgPool AvgPoolGrad Conv2D Conv2DBackpropFilter Conv2DBackpropInput MaxPool
        MaxPoolGrad MaxPoolGradGrad LRN LRNGrad BiasAdd BiasAddGrad Elu EluGrad InTopK L2Loss
        LeakyRelu LeakyReluGrad Relu Relu6 Relu6Grad ReluGrad Softplus Softsign LogSoftmax
        SigmoidCrossEntropyWithLogits Softmax SoftmaxCrossEntropyWithLogits
        SparseSoftmaxCrossEntropyWithLogits ReverseSequence""",
    "state": """Assign AssignAdd AssignSub IsVariableInitialized ScatterAdd ScatterSub
        ScatterUpdate VariableRead VariableRefFetch VariableV2
        ApplyAdagrad ApplyAdam ApplyGradientDescent ApplyMomentum""",
    # a loop runs its cond and body programs on its own device (a body op with no GPU kernel
    # keeps the loop on the CPU: placement looks into the body, passes.place); a TensorArray's
    # elements stay the arrays written (device arrays too)
    "control": """Merge Switch CheckNumerics EnsureShape LoopVariableRead StatelessWhile While
        WhileGrad WhileGradShard WhileShard TensorArrayCloseV3 TensorArrayConcatV3
        TensorArrayGatherV3 TensorArrayGradGather TensorArrayGradScatter TensorArrayReadV3
        TensorArrayScatterV3 TensorArraySizeV3 TensorArraySplitV3 TensorArrayStack
        TensorArrayUnstack TensorArrayV3 TensorArrayWriteV3""",
}

# Ops whose GPU kernel is their CPU kernel on the host (inputs downloaded, outputs uploaded).
_HOST = {
    "random": "RandomStandardNormal RandomUniform TruncatedNormal RandomUniformInt "
              "RandomShuffle Multinomial",  # the host's generator: same numbers on both devices
    # no input to take a namespace from (Eye), or inputs in host memory (Range): made on the
    # host, uploaded (as a Const)
    "array": "Eye Range",
}

_HOST_IO = "host-only I/O (files and storage are read and written by the host)"
# Ops only the host can run, by the reason placement gives (map-reduce's ops, and newer
# families, say so where they register their ops).
_CPU_ONLY = {
    "string tensors live in host memory (pyarrow compute)":
        "AsString RegexFullMatch RegexReplace StringJoin StringLength StringLower StringSplit "
        "StringSplitV2 StringStrip StringToHashBucketFast StringToNumber StringUpper",
    "parses string records in host memory": "DecodeCSV DecodeRaw ParseExampleV1",
    "py_func runs a Python function on host values": "PyFunc PyFuncStateless",
    "queues hold host values (a resource of the host)":
        "EpochQueueV2 FIFOQueueV2 PaddingFIFOQueueV2 PriorityQueueV2 QueueCloseV2 "
        "QueueDequeueV2 QueueEnqueueV2 QueueIsClosedV2 QueueSizeV2 RandomShuffleQueueV2 "
        "SplitQueueV2",
    "readers: " + _HOST_IO: "ReaderCounterV2 ReaderReadUpToV2 ReaderReadV2 ReaderResetV2",
    "tf.data iterators hold host values (a resource of the host)":
        "DatasetToSingleElement DatasetToTFRecord IteratorGetNext IteratorGetNextAsOptional "
        "IteratorGetNextFromStringHandle IteratorV2 MakeIterator OptionalGetValue ReduceDataset",
    "summaries are host protocol buffers": "AudioSummaryV2 HistogramSummary ImageSummary "
                                           "MergeSummary ScalarSummary TensorSummaryV2 TextSummary",
    "savers: " + _HOST_IO: "CommitCheckpoint RestoreShard SaveShard",
    "input pipelines: " + _HOST_IO: "ReadSplit ReaderIdentity SplitQueueAck SplitQueueLease "
                                    "MatchingFilesV1",
    "gradient accumulators are host resources (TF's ConditionalAccumulator is CPU-only too)":
        "SyncAccApply SyncAccSetStep SyncAccTake SyncClose SyncTokenRelease SyncTokenWait",
    "checks and logs on the host (TF's Assert is CPU-only too)": "Assert",
    "logs on the host (TF's Print is CPU-only too)": "Print",
    "samples with the host's random generator": "CandidateSampler",
}

for _names in _SAME.values():
    declare_gpu(_names, gpu="same")
for _names in _HOST.values():
    declare_gpu(_names, gpu="host")
for _reason, _names in _CPU_ONLY.items():
    declare_gpu(_names, cpu_only=_reason)
#: every op type declared above (tests check that each is registered)
DECLARED = frozenset(n for t in (*_SAME.values(), *_HOST.values(), *_CPU_ONLY.values())
                     for n in t.split())


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
    # the host's generators (gpu="host") read their shape and bounds where they run
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


def _kernel_module(d) -> str:
    return getattr(d.kernels.get("CPU"), "__module__", None) or ""


def install() -> int:
    """Give every registered op whose :class:`~tensorvm.framework.op_registry.OpDef` says how
    it runs on a GPU (``gpu``) its GPU kernel: its CPU kernel (``"same"``), that kernel on the
    host (``"host"``), or its own (:data:`OVERRIDES`); CPU-only ops (``cpu_only``) and ops
    with a GPU kernel are left alone. Returns how many kernels it registered. Idempotent;
    runs when tensorvm is imported, and again after a module registers more ops."""
    n = 0
    for op_type, d in list(registry.items()):
        if "GPU" in d.kernels or d.cpu_only:
            continue
        if op_type in OVERRIDES:
            register_kernel(op_type, "GPU", OVERRIDES[op_type])
        elif d.gpu == "same":
            register_kernel(op_type, "GPU", d.kernels["CPU"])
        elif d.gpu == "host":
            register_kernel(op_type, "GPU", on_host(d.kernels["CPU"], d.needs_ctx))
        else:
            continue
        n += 1
    return n


def undecided() -> list[str]:
    """tensorvm's own op types (kernels defined in a ``tensorvm`` module) with neither a GPU
    kernel nor a CPU-only mark. A user's op is left out: without a GPU kernel registered for
    it, placement treats it as CPU-only (soft placement moves it, else an error names it)."""
    return sorted(t for t, d in registry.items() if "GPU" not in d.kernels and not d.cpu_only
                  and _kernel_module(d).startswith("tensorvm."))


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
