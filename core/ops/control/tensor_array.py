"""TF 1.x's ``tv.TensorArray`` (graph mode): a list of tensors of one dtype, written and read
by index, as a value threaded through its *flow* tensor.

Each write returns a new ``TensorArray`` whose flow is the written version (TF's rule: use the
returned array). The flow's value is a :class:`~tensorvm.ops.control.tensor_array_value.
TensorArrayValue`, a persistent array: a write appends in place (O(1) per element, no copy of
the array) and the versions other ops hold never change. A ``TensorArray`` in a
``tv.while_loop``'s ``loop_vars`` is carried as its flow and comes back a ``TensorArray``; one
only read in the body may stay outside the loop variables (it is captured, TF's ``Enter``).

Gradients are TensorArrays too (TF 2's ``TensorList`` rule): the gradient of a read is an array
holding the read's gradient at its index, the gradient of a written element is that index of
the gradient of the written array (zeros where nothing read it), and gradient arrays sum by
index — so ``unstack`` → ``read`` in a loop body → ``write`` → ``stack`` (the ``dynamic_rnn``
pattern) costs O(1) per step backwards too.

TF's checks: a write of another dtype, or of a static shape incompatible with the element
shape, fails when the op is built; an out-of-range index of a fixed-size array, a second write
to an index and a read of an index never written (when the element shape is not fully known;
otherwise it reads as zeros, as in TF) fail the step with TF's messages. ``clear_after_read``
is accepted, but a read never changes the array (TF 2's rule), so an element may be read twice;
``close()`` is an op that does nothing.

>>> import tensorvm as tv
>>> ta = tv.TensorArray(tv.float32, size=3)
>>> ta = ta.write(0, 1.0).write(1, 2.0).write(2, 3.0)
>>> i, acc = tv.while_loop(lambda i, acc: i < 3,
...                        lambda i, acc: (i + 1, acc.write(i, ta.read(i) * 10.0)),
...                        [0, tv.TensorArray(tv.float32, size=3)])
>>> with tv.Session() as s: s.run([ta.stack(), acc.stack()])
[array([1., 2., 3.], dtype=float32), array([10., 20., 30.], dtype=float32)]
"""
from __future__ import annotations

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor, TensorShape, get_default_graph
from ...framework.op_def_library import apply_op
from ...framework.tensor_conversion import convert_to_tensor
from .tensor_array_ops import _compatible, _merge, _tf_dtype_name, _tf_shape

__all__ = ["TensorArray"]


class _Meta:
    """What the TensorArrays of one lineage share (TF shares its ``_element_shape`` list the
    same way): the element shape known so far, the static size."""

    __slots__ = ("dynamic_size", "element_shape", "infer_shape", "name", "size")

    def __init__(self, element_shape, size, dynamic_size, infer_shape, name):
        self.element_shape, self.size = element_shape, size
        self.dynamic_size, self.infer_shape, self.name = dynamic_size, infer_shape, name


def _dims(shape):
    if shape is None:
        return None
    if isinstance(shape, TensorShape):
        return shape.dims
    return tuple(None if d is None else int(d) for d in shape)


def _static_int(t):
    if isinstance(t, int):
        return t
    if isinstance(t, Tensor) and t.op.type == "Const":
        v = t.op.attrs["value"]
        return int(v) if getattr(v, "ndim", 1) == 0 else None
    return None


def _int32(x, what):
    t = convert_to_tensor(x) if isinstance(x, Tensor) else convert_to_tensor(x, _dt.int32)
    if not t.dtype.is_integer:
        raise TypeError(f"Expected int32 passed to parameter {what!r} of op "
                        f"'TensorArray', got {x!r} of dtype {t.dtype.name} instead.")
    if t.dtype != _dt.int32:
        from ..math.math_ops import cast
        t = cast(t, _dt.int32)
    return t


class TensorArray:
    """A list of tensors of ``dtype`` (TF 1.x's ``tf.TensorArray``, graph mode): see the
    module docstring. ``size`` is the number of elements (a Python int or an int32 tensor);
    ``dynamic_size=True`` lets writes past it grow the array; ``element_shape`` (with
    ``infer_shape``, merged with every write's static shape) gives reads and ``stack`` their
    static shapes. ``handle`` is not supported (``ta.handle`` is the flow)."""

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None,
                 tensor_array_name=None, handle=None, flow=None, infer_shape=True,
                 element_shape=None, colocate_with_first_write_call=True, name=None):
        self._dtype = _dt.as_dtype(dtype)
        if handle is not None:
            raise ValueError("TensorArray: handle= is not supported (a tensorvm TensorArray "
                             "is its flow: pass flow=)")
        self._clear_after_read = True if clear_after_read is None else bool(clear_after_read)
        elem = _dims(element_shape)
        if flow is not None:
            self._flow = convert_to_tensor(flow)
            self._meta = _Meta(elem, _static_int(size), bool(dynamic_size), bool(infer_shape),
                               tensor_array_name or name or "TensorArray")
            return
        if size is None:
            raise ValueError("Size must be provided if handle is not provided")
        op = apply_op("TensorArrayV3", [_int32(size, "size")],
                      {"dtype": self._dtype, "element_shape": elem,
                       "dynamic_size": bool(dynamic_size), "infer_shape": bool(infer_shape),
                       "tensor_array_name": tensor_array_name or ""},
                      name=name or "TensorArray")
        self._flow = op.outputs[0]
        self._meta = _Meta(elem, _static_int(size), bool(dynamic_size), bool(infer_shape),
                           tensor_array_name or op.name)

    # ---- plain attributes -----------------------------------------------------------------
    @property
    def flow(self) -> Tensor:
        """The tensor whose value is this array's contents (a ``variant`` scalar)."""
        return self._flow

    @property
    def handle(self) -> Tensor:
        """The flow (a tensorvm TensorArray has no resource handle)."""
        return self._flow

    @property
    def dtype(self) -> _dt.DType:
        return self._dtype

    @property
    def dynamic_size(self) -> bool:
        return self._meta.dynamic_size

    @property
    def element_shape(self) -> TensorShape:
        return TensorShape(self._meta.element_shape)

    def __repr__(self):
        return f"<tv.TensorArray {self._meta.name} dtype={self._dtype.name} flow={self._flow.name}>"

    def _with_flow(self, flow: Tensor) -> TensorArray:
        """This array's lineage at ``flow`` (how a while_loop gives a TensorArray back)."""
        ta = object.__new__(TensorArray)
        ta._dtype, ta._clear_after_read, ta._meta = self._dtype, self._clear_after_read, \
            self._meta
        ta._flow = flow
        return ta

    def _check_element_shape(self, shape) -> None:
        if not _compatible(shape, self._meta.element_shape):
            raise ValueError(f"Inconsistent shapes: saw {_tf_shape(shape)} but expected "
                             f"{_tf_shape(self._meta.element_shape)} ")
        if self._meta.infer_shape:
            self._meta.element_shape = _merge(self._meta.element_shape, shape)

    def _value(self, value, what) -> Tensor:
        if isinstance(value, Tensor) or hasattr(value, "_as_graph_element"):
            t = convert_to_tensor(value)
            if t.dtype != self._dtype:
                raise InvalidArgumentError(
                    f"TensorArray dtype is {_tf_dtype_name(self._dtype)} but Op is trying to "
                    f"{what} dtype {_tf_dtype_name(t.dtype)}.")
            return t
        return convert_to_tensor(value, self._dtype)

    def _attrs(self, shape):
        return {"dtype": self._dtype, "shape": shape}

    # ---- writes: each returns a new TensorArray ---------------------------------------------
    def write(self, index, value, name=None) -> TensorArray:
        """This array with ``value`` at ``index`` (each index may be written once)."""
        with get_default_graph().name_scope(name or "TensorArrayWrite"):
            value = self._value(value, "write")
            self._check_element_shape(value._shape)
            flow = apply_op("TensorArrayWriteV3", [self._flow, _int32(index, "index"), value],
                            name="TensorArrayWriteV3").outputs[0]
        return self._with_flow(flow)

    def scatter(self, indices, value, name=None) -> TensorArray:
        """This array with ``value[k]`` at ``indices[k]``."""
        with get_default_graph().name_scope(name or "TensorArrayScatter"):
            value = self._value(value, "write")
            if value._shape is not None and len(value._shape) >= 1:
                self._check_element_shape(value._shape[1:])
            flow = apply_op("TensorArrayScatterV3",
                            [self._flow, _int32(indices, "indices"), value],
                            name="TensorArrayScatterV3").outputs[0]
        return self._with_flow(flow)

    def unstack(self, value, name=None) -> TensorArray:
        """This array with ``value[k]`` at ``k`` for every row of ``value``."""
        with get_default_graph().name_scope(name or "TensorArrayUnstack"):
            value = self._value(value, "write")
            if value._shape is not None and len(value._shape) >= 1:
                self._check_element_shape(value._shape[1:])
            flow = apply_op("TensorArrayUnstack", [self._flow, value],
                            name="TensorArrayScatter").outputs[0]
        return self._with_flow(flow)

    def split(self, value, lengths, name=None) -> TensorArray:
        """This array with consecutive pieces of ``value`` (``lengths[k]`` rows) at ``k``."""
        with get_default_graph().name_scope(name or "TensorArraySplit"):
            value = self._value(value, "write")
            lengths = convert_to_tensor(lengths, _dt.int64) if not isinstance(lengths, Tensor) \
                else lengths
            if value._shape is not None and len(value._shape) >= 1:
                self._check_element_shape((None,) + tuple(value._shape[1:]))
            flow = apply_op("TensorArraySplitV3", [self._flow, value, lengths],
                            name="TensorArraySplitV3").outputs[0]
        return self._with_flow(flow)

    # ---- reads ----------------------------------------------------------------------------
    def read(self, index, name=None) -> Tensor:
        """The element at ``index``."""
        return apply_op("TensorArrayReadV3", [self._flow, _int32(index, "index")],
                        self._attrs(self._meta.element_shape),
                        name=name or "TensorArrayReadV3").outputs[0]

    def gather(self, indices, name=None) -> Tensor:
        """The elements at ``indices``, stacked."""
        idx = _int32(indices, "indices")
        n = idx._shape[0] if idx._shape is not None and len(idx._shape) == 1 else None
        es = self._meta.element_shape
        return apply_op("TensorArrayGatherV3", [self._flow, idx],
                        self._attrs(None if es is None else (n,) + tuple(es)),
                        name=name or "TensorArrayGatherV3").outputs[0]

    def stack(self, name=None) -> Tensor:
        """All elements stacked: ``[size, *element_shape]``."""
        es = self._meta.element_shape
        n = None if self._meta.dynamic_size else self._meta.size
        with get_default_graph().name_scope(name or "TensorArrayStack"):
            return apply_op("TensorArrayStack", [self._flow],
                            self._attrs(None if es is None else (n,) + tuple(es)),
                            name="TensorArrayGatherV3").outputs[0]

    def concat(self, name=None) -> Tensor:
        """All elements concatenated along their first axis."""
        es = self._meta.element_shape
        shape = (None,) + tuple(es[1:]) if es is not None and len(es) >= 1 else None
        return apply_op("TensorArrayConcatV3", [self._flow], self._attrs(shape),
                        name=name or "TensorArrayConcatV3").outputs[0]

    def size(self, name=None) -> Tensor:
        """The number of elements (an int32 scalar)."""
        return apply_op("TensorArraySizeV3", [self._flow],
                        name=name or "TensorArraySizeV3").outputs[0]

    def identity(self) -> TensorArray:
        """This array through an Identity op (TF uses it to add control dependencies)."""
        from ..array.array_ops import identity
        return self._with_flow(identity(self._flow))

    def close(self, name=None):
        """An op that closes the array (it does nothing: the array is a value)."""
        return apply_op("TensorArrayCloseV3", [self._flow], name=name or "TensorArrayCloseV3")

