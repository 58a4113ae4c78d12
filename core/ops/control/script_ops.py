"""``tv.py_func``: a plain Python/NumPy function as an op (TensorFlow 1.x's ``tf.py_func``).

The function gets the NumPy values of ``inp`` (read-only views: values may be shared with other
ops, so copy before writing) and returns one array, or a list/tuple of arrays when ``Tout`` is a
list. Outputs have unknown shape (as in TF). Each returned value must have its ``Tout`` dtype:
NumPy arrays and scalars of another dtype fail with ``InvalidArgumentError`` naming the op;
plain Python numbers and lists are converted to ``Tout``. An exception raised by the function
comes back from ``Session.run`` as a ``tv.errors`` class naming the op and the line that created
it, chained from the original — as in TF: ``InvalidArgumentError`` for ValueError/TypeError
(and IndexError), ``OutOfRangeError`` for StopIteration (the end of an input),
``UnimplementedError`` for NotImplementedError, ``ResourceExhaustedError`` for MemoryError,
``UnknownError`` for anything else.

The function is an attribute of the op; it travels to Dask workers with the task (cloudpickle
ships lambdas and closures). A graph holding a py_func cannot be written as a JSON GraphDef.

``stateful=True`` (the default) ops are never folded, merged or recomputed; ``stateful=False``
ones may be merged with an identical call but are still never constant-folded (that would run
user code while planning).

Gradients: as in TF, a py_func has none — ``tv.gradients`` through it raises ``NotFoundError`` —
unless one is given. *tensorvm extension*: ``grad=fn`` with ``fn(op, *output_grads)`` returning
one gradient (or None) per input, built from tv ops, exactly like a function registered with
``tv.register_gradient`` (an output that does not reach the loss gets ``None`` as its output
gradient); a gradient written in NumPy is itself a ``tv.py_func``:

>>> import numpy as np, tensorvm as tv
>>> x = tv.constant([1.0, 2.0])
>>> sq = lambda op, g: [tv.py_func(lambda a, b: 2 * a * b, [op.inputs[0], g], tv.float32)]
>>> y = tv.py_func(np.square, [x], tv.float32, grad=sq)
>>> with tv.Session() as s: s.run([y, tv.gradients(tv.reduce_sum(y), x)[0]])
[array([1., 4.], dtype=float32), array([2., 4.], dtype=float32)]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import (InvalidArgumentError, NotFoundError, OutOfRangeError,
                                 UnimplementedError)
from ...framework.graph import Operation
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor

__all__ = ["py_func", "numpy_function"]


def _readonly(v):
    """A read-only view: a value may be shared with other ops, or be a variable's stored
    value (itself read-only, so the view's flag cannot be turned back on)."""
    if isinstance(v, np.ndarray):
        v = v.view()
        v.flags.writeable = False
    return v


def _convert_output(i, value, dtype, op_type):
    """One returned value as an array of ``dtype``; NumPy values must already have it."""
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if dtype.is_string:
            if arr.dtype.kind in "US":
                return np.asarray(arr.astype(str), dtype=object)
            if arr.dtype.kind == "O":
                return arr
        elif arr.dtype == dtype.np_dtype:
            return arr
        raise InvalidArgumentError(
            f"{i}-th value returned by the {op_type} function is {_dt.as_dtype(arr.dtype).name}"
            f" but expects {dtype.name}")
    try:
        return _dt.to_numpy(value, dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidArgumentError(
            f"{i}-th value returned by the {op_type} function ({type(value).__name__}) cannot "
            f"be converted to {dtype.name}: {e}") from None


def _py_func_kernel(*inputs, func, Tout, grad=None, op_type="PyFunc"):
    try:
        result = func(*[_readonly(v) for v in inputs])
    except StopIteration as e:  # TF's mapping: the end of an input
        raise OutOfRangeError(f"StopIteration: {e}" if str(e) else "StopIteration") from e
    except NotImplementedError as e:
        raise UnimplementedError(f"NotImplementedError: {e}") from e
    if not Tout:
        return ()
    if len(Tout) == 1 and not isinstance(result, (list, tuple)):
        result = [result]
    if not isinstance(result, (list, tuple)) or len(result) != len(Tout):
        got = len(result) if isinstance(result, (list, tuple)) else 1
        raise InvalidArgumentError(
            f"the {op_type} function returned {got} values, expected {len(Tout)} (Tout)")
    out = tuple(_convert_output(i, v, dt, op_type) for i, (v, dt) in enumerate(zip(result, Tout)))
    return out[0] if len(out) == 1 else out


def _py_func_shape(inputs, attrs):
    return [(dt, None) for dt in attrs["Tout"]]


def _py_func_grad(op: Operation, *grads):
    fn = op.attrs.get("grad")
    if fn is None:
        raise NotFoundError(
            f"no gradient is defined for py_func op {op.name!r} ({op.type}), created at "
            f"{op.location}; pass grad=fn to tv.py_func, or wrap it in tv.stop_gradient")
    return list(fn(op, *grads))


register_op("PyFunc", _py_func_shape, _py_func_kernel, grad=_py_func_grad, stateful=True)
register_op("PyFuncStateless", _py_func_shape, _py_func_kernel, grad=_py_func_grad,
            foldable=False)


def py_func(func, inp, Tout, stateful=True, name=None, grad=None):
    """Run ``func`` on the NumPy values of ``inp``; returns one tensor, or a list when ``Tout``
    is a list (an empty list returns the op, to run as a target).

    ``grad`` (a tensorvm extension) is the gradient function ``grad(op, *output_grads)``.
    """
    if not callable(func):
        raise InvalidArgumentError(f"py_func: func must be callable, got {type(func).__name__}")
    if grad is not None and not callable(grad):
        raise InvalidArgumentError("py_func: grad must be callable")
    is_list = isinstance(Tout, (list, tuple))
    try:
        touts = tuple(_dt.as_dtype(t) for t in (Tout if is_list else [Tout]))
    except TypeError as e:
        raise InvalidArgumentError(f"py_func: bad Tout {Tout!r}: {e}") from None
    op_type = "PyFunc" if stateful else "PyFuncStateless"
    inputs = [convert_to_tensor(x) for x in (inp if isinstance(inp, (list, tuple)) else [inp])]
    attrs = {"func": func, "Tout": touts, "op_type": op_type}
    if grad is not None:
        attrs["grad"] = grad
    op = apply_op(op_type, inputs, attrs, name=name or op_type)
    if is_list:
        return list(op.outputs) if touts else op
    return op.outputs[0]


def numpy_function(func, inp, Tout, name=None):
    """``tf.numpy_function``: a stateful :func:`py_func`."""
    return py_func(func, inp, Tout, stateful=True, name=name)
