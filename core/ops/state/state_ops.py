"""Variable ops. A variable is a resource on its device (``VariableState`` in the device's
ResourceMgr); these ops are colocated with it and are stateful (never folded, merged or
recomputed). Updates are atomic per variable (one lock each); reads take the lock too, so a
scatter update may write in place when no reader holds the value (:func:`sole_holder`)."""
from __future__ import annotations

import sys
import threading

import numpy as np

from ...framework.errors import FailedPreconditionError, InvalidArgumentError
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ..common import add_at

__all__: list[str] = []


class VariableState:
    """A variable's value, stored read-only: a fetched or py_func-handed value can never
    write through to the variable (an in-process session copies the read-only results it
    returns, as TF returns copies)."""

    __slots__ = ("name", "_value", "lock", "dtype", "shape")

    def __init__(self, name, dtype, shape):
        self.name = name
        self._value = None
        self.lock = threading.Lock()
        self.dtype = dtype
        self.shape = shape

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, value):
        if isinstance(value, np.ndarray) and value.flags.writeable:
            value.flags.writeable = False
        self._value = value

    def set(self, value):
        self.value = value
        return self._value

    def read(self):
        v = self.value
        if v is None:
            raise FailedPreconditionError(
                f"Attempting to use uninitialized value {self.name}")
        return v

    def read_locked(self):
        """:meth:`read` under the variable's lock: a reader never sees an update that
        :func:`sole_holder` allowed in place half done (the read op's kernel)."""
        with self.lock:
            return self.read()


def sole_holder(cur) -> bool:
    """Whether ``cur``, a variable's value read by an update under the variable's lock, is
    held by nothing but the variable and the caller: no reader's step in flight, no view, no
    fetched result (every reader takes its reference under the lock, see
    :meth:`VariableState.read_locked`). Then the update may write into it instead of copying
    (a sparse update of a large table costs the rows it touches, not the table). The count
    of references when nothing else holds it is measured once (:data:`_ALONE`), not assumed:
    interpreters differ in the references a call takes."""
    return type(cur) is np.ndarray and cur.flags.owndata and sys.getrefcount(cur) <= _ALONE


def _alone() -> int:
    probe = VariableState("probe", None, None)
    probe.value = np.empty(1)
    cur = probe.read()
    return _count(cur)


def _count(cur) -> int:  # sole_holder's own frame shape: the caller's local, one argument
    return sys.getrefcount(cur)


_ALONE = _alone()


def _var(ctx, var_name, container, dtype, shape) -> VariableState:
    v = ctx.resources.lookup_or_create(container, var_name,
                                       lambda: VariableState(var_name, dtype, shape))
    if (v.dtype is not dtype and v.dtype != dtype) or (
            v.shape is not shape and shape is not None and v.shape is not None
            and tuple(v.shape) != tuple(shape)):
        raise InvalidArgumentError(_redeclared(v, dtype, shape, ctx))
    return v


def _dims(shape) -> str:
    return "?" if shape is None else "[" + ", ".join("?" if d is None else str(d)
                                                     for d in shape) + "]"


def _redeclared(v, dtype, shape, ctx) -> str:
    return (f"variable {v.name!r} on {ctx.device} already exists as {v.dtype.name}"
            f"{_dims(v.shape)}, but this graph declares it {dtype.name}{_dims(shape)}. "
            "Variables on a shared cluster outlive the sessions and programs that made them "
            "(shared by name, as on TF's parameter servers): clear them with "
            "tv.Session.reset(target), or give this variable another name")


def _check_shape(var, value, op_name):
    if var.shape is not None and value.shape != tuple(var.shape) and \
            None not in var.shape:
        raise InvalidArgumentError(
            f"Assign to {var.name}: value of shape {list(value.shape)} does not match the "
            f"variable's shape {list(var.shape)}")


def _read_kernel(ctx, *, var_name, container, dtype, shape):
    return _var(ctx, var_name, container, dtype, shape).read_locked()


def _assign_kernel(ctx, value, *, var_name, container, dtype, shape, validate_shape=True):
    v = _var(ctx, var_name, container, dtype, shape)
    if dtype.is_string:
        value = np.array(value, dtype=object, copy=True)
    else:  # a GPU variable keeps a device array (one source: the namespace of the value)
        value = array_namespace(value).array(value, dtype=dtype.np_dtype, copy=True)
    if validate_shape:
        _check_shape(v, value, ctx.op_name)
    with v.lock:
        v.set(value)
    return value


def _update(fn):
    def kernel(ctx, value, *, var_name, container, dtype, shape):
        v = _var(ctx, var_name, container, dtype, shape)
        with v.lock:
            new = fn(v.read(), value)
            new = new.astype(v.dtype.np_dtype, copy=False) if hasattr(new, "astype") else new
            return v.set(new)
    return kernel


def _scatter(mode):
    def kernel(ctx, indices, updates, *, var_name, container, dtype, shape):
        v = _var(ctx, var_name, container, dtype, shape)
        with v.lock:
            cur = v.read()
            xp = array_namespace(cur, indices, updates)
            n = cur.shape[0]
            # on a GPU the indices are read in host memory (kernels_gpu.HOST_MEMORY_INPUTS):
            # checked there without waiting for the device, then uploaded
            if array_namespace(indices) is np:
                idx = np.asarray(indices)
                bad = idx.size and (idx.min() < -n or idx.max() >= n)
            else:  # indices a GPU op made: one flag to the host
                idx = indices
                bad = idx.size and bool(((idx < -n) | (idx >= n)).any())
            if bad:
                raise InvalidArgumentError(
                    f"{mode}: indices out of range [0, {n}) for variable {v.name}")
            idx = xp.asarray(idx)
            upd = xp.asarray(updates, dtype=cur.dtype)
            # In place when nothing else holds the value (rows touched, not the table); else
            # copy on write: a reader of the old value in flight keeps its snapshot.
            in_place = sole_holder(cur)
            if in_place:
                cur.flags.writeable = True
                new = cur
            else:
                new = cur.copy()
            try:
                if mode == "ScatterAdd":
                    add_at(new, idx, upd)
                elif mode == "ScatterSub":
                    add_at(new, idx, -upd)
                elif mode in _AT_UFUNCS:  # repeated indices combine, as TF's kernels do
                    _AT_UFUNCS[mode].at(new, idx, upd)
                else:
                    new[idx] = upd
            finally:
                if in_place:
                    cur.flags.writeable = False
            return v.set(new)
    return kernel


def _var_shape(inputs, attrs):
    return [(attrs["dtype"], attrs["shape"])]


def _value_shape(inputs, attrs):
    value = inputs[0]
    shp = attrs["shape"]
    if attrs.get("validate_shape", True) and shp is not None and value._shape is not None:
        if len(shp) != len(value._shape) or any(a is not None and b is not None and a != b
                                                for a, b in zip(shp, value._shape)):
            raise InvalidArgumentError(
                f"cannot assign a value of shape {list(value._shape)} to variable "
                f"{attrs['var_name']!r} of shape {list(shp)}")
    if value.dtype != attrs["dtype"]:
        raise InvalidArgumentError(
            f"cannot assign a {value.dtype.name} value to variable {attrs['var_name']!r} of "
            f"dtype {attrs['dtype'].name}")
    return [(attrs["dtype"], shp)]


def _scatter_shape(inputs, attrs):
    idx, upd = inputs
    if not idx.dtype.is_integer:
        raise InvalidArgumentError(f"scatter indices must be integers, got {idx.dtype.name}")
    if upd.dtype != attrs["dtype"]:
        raise InvalidArgumentError(
            f"scatter updates of dtype {upd.dtype.name} into variable {attrs['var_name']!r} of"
            f" dtype {attrs['dtype'].name}")
    return [(attrs["dtype"], attrs["shape"])]


register_op("VariableV2", _var_shape, _read_kernel, stateful=True, needs_ctx=True,
            differentiable=False, gpu_fallback=True, reads_only=True)


def _read_after_kernel(ctx, ref, *, var_name, container, dtype, shape):
    return _var(ctx, var_name, container, dtype, shape).read_locked()


# A read of a variable made under control_dependencies (TF 1.x's ref semantics: an op reading a
# variable there sees it after those ops): it reads the state when it runs, not when the
# variable's own op ran. Its input is the variable's tensor (for ordering and gradients, which
# pass through to it); its value is read by name.
register_op("VariableRead", lambda inputs, attrs: [(attrs["dtype"], attrs["shape"])],
            _read_after_kernel, stateful=True, needs_ctx=True, grad=lambda op, g: [g],
            gpu_fallback=True, reads_only=True)
def _count_up_to_kernel(ctx, *, var_name, container, dtype, shape, limit):
    from ...framework.errors import OutOfRangeError
    v = _var(ctx, var_name, container, dtype, shape)
    with v.lock:
        cur = v.read()
        if int(cur) >= limit:
            raise OutOfRangeError(f"Reached limit of {limit}")
        v.set(np.asarray(cur + 1, dtype=cur.dtype))
        return cur


register_op("CountUpTo", lambda inputs, attrs: [(attrs["dtype"], ())], _count_up_to_kernel,
            stateful=True, needs_ctx=True, differentiable=False,
            cpu_only="an integer variable's counter (TF's CountUpTo is CPU-only too)")
register_op("Assign", _value_shape, _assign_kernel, stateful=True, needs_ctx=True,
            differentiable=False, gpu_fallback=True)
register_op("AssignAdd", _value_shape, _update(lambda a, b: a + b), stateful=True,
            needs_ctx=True, differentiable=False)
register_op("AssignSub", _value_shape, _update(lambda a, b: a - b), stateful=True,
            needs_ctx=True, differentiable=False)
for _mode in ("ScatterAdd", "ScatterSub", "ScatterUpdate"):
    register_op(_mode, _scatter_shape, _scatter(_mode), stateful=True, needs_ctx=True,
                differentiable=False)
# Multiply, divide, min and max by rows: host kernels (CuPy has no ufunc.at for them)
_AT_UFUNCS = {"ScatterMul": np.multiply, "ScatterDiv": np.divide, "ScatterMin": np.minimum,
              "ScatterMax": np.maximum}
for _mode in _AT_UFUNCS:
    register_op(_mode, _scatter_shape, _scatter(_mode), stateful=True, needs_ctx=True,
                differentiable=False, cpu_only="row-wise multiply/divide/min/max updates run "
                "on the host (CuPy has no ufunc.at for them)")


def _scatter_nd(mode):
    def kernel(ctx, indices, updates, *, var_name, container, dtype, shape):
        v = _var(ctx, var_name, container, dtype, shape)
        with v.lock:
            cur = v.read()
            idx = np.asarray(indices)
            k = idx.shape[-1] if idx.ndim else 0
            if idx.ndim == 0 or k > cur.ndim:
                raise InvalidArgumentError(f"{mode}: indices must end in a dimension of at most "
                                           f"{cur.ndim} (the variable's rank), got shape "
                                           f"{list(idx.shape)}")
            bad = ((idx < 0) | (idx >= np.asarray(cur.shape[:k]))).any(axis=-1)
            if bad.any():
                first = np.argwhere(bad)[0]
                raise InvalidArgumentError(f"{mode}: indices{first.tolist()} = "
                                           f"{idx[tuple(first)].tolist()} does not index into "
                                           f"shape {list(cur.shape)} of variable {v.name}")
            where = tuple(np.moveaxis(idx, -1, 0))
            upd = np.broadcast_to(np.asarray(updates, dtype=cur.dtype),
                                  idx.shape[:-1] + cur.shape[k:])
            new = cur.copy()
            if mode == "ScatterNdAdd":
                np.add.at(new, where, upd)
            elif mode == "ScatterNdSub":
                np.subtract.at(new, where, upd)
            else:
                new[where] = upd
            return v.set(new)
    return kernel


for _mode in ("ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub"):
    register_op(_mode, _scatter_shape, _scatter_nd(_mode), stateful=True, needs_ctx=True,
                differentiable=False, cpu_only="n-d scatter updates of a variable run on the "
                "host")


def _is_init_kernel(ctx, *, var_name, container, dtype, shape):
    v = _var(ctx, var_name, container, dtype, shape)
    return np.asarray(v.value is not None)


register_op("IsVariableInitialized", lambda inputs, attrs: [(__import__(
    "tensorvm.framework.dtypes", fromlist=["x"]).bool_, ())], _is_init_kernel, stateful=True,
    needs_ctx=True, differentiable=False, reads_only=True)


def _ref_fetch_kernel(ctx, ref, *, var_name, container, dtype, shape):
    from ...vm.interpreter import DEAD
    if ref is DEAD:  # the variable itself is on an untaken branch
        return DEAD
    return _var(ctx, var_name, container, dtype, shape).read_locked()


# A variable fetched itself (its ref output) in a step that updates it, in process: TF's local
# session returns the ref's buffer as the step left it. The op reads the variable after its
# control inputs, the step's updates of it (tensorvm.passes.ref_fetch); an update on a
# cond branch not taken (a dead control input) does not make the fetch dead.
register_op("VariableRefFetch", lambda inputs, attrs: [(attrs["dtype"], attrs["shape"])],
            _ref_fetch_kernel, stateful=True, needs_ctx=True, differentiable=False,
            gpu_fallback=True, forwards_dead=True)
