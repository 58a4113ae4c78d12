"""The ``While`` op (TF's ``While``/``StatelessWhile``): its shape rule and its kernel, which
runs the compiled cond and body (:class:`~tensorvm.ops.control.while_func.Func`) in the stage
task that holds the loop, iteration after iteration, keeping the loop values on the loop's
device (int32 counters on the host), checking shape invariants, and taping the values entering
each iteration for the gradient (:mod:`tensorvm.ops.control.while_grad`). A loop the partition
pass split across worker processes runs its shards here too (``WhileShard``,
:mod:`tensorvm.ops.control.while_frames`).
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.op_registry import register_op
from ...vm.kernels.array_api import is_device_array, to_device, to_host
from .while_frames import in_dask_worker, run_sharded
from .while_grad import _while_grad

__all__: list[str] = []

variant = _dt.DType("variant", np.dtype(object))  # the tape: a Python list, never a tensor


def _while_shape(inputs, attrs):
    n = attrs["n"]
    specs = [(t.dtype, s) for t, s in zip(inputs[:n], attrs["shapes"])]
    return specs + [(variant, ())]


def _check_shape(v, inv, i, frame):
    if inv is None:
        return
    shp = np.shape(v)
    if len(shp) != len(inv) or any(b is not None and a != b for a, b in zip(shp, inv)):
        raise InvalidArgumentError(
            f"while_loop {frame!r}: loop variable {i} has shape {list(shp)} after an "
            f"iteration, outside its shape invariant {_shape_str(inv)}")


def _while_kernel(ctx, *ins, cond, body, n, ncc, nbc, has_max, back_prop, parallel_iterations,
                  shapes, frame, frame_devices=(), home=None):
    if frame_devices:  # split by the partition pass (a loop across devices)
        if in_dask_worker():
            return run_sharded(ctx, ins, cond=cond, body=body, n=n, ncc=ncc, nbc=nbc,
                               has_max=has_max, frame=frame, home=home or ctx.device,
                               devices=frame_devices, tag=frame, window=parallel_iterations)
        if home is not None:  # in process the home's kernel runs every device's part
            return ()
    vals = list(ins[:n])
    ccaps = list(ins[n:n + ncc])
    bcaps = list(ins[n + ncc:n + ncc + nbc])
    limit = int(to_host(ins[-1])) if has_max else None
    tape = [] if back_prop else None
    # On a GPU the loop's values stay on the device, except its int32 values (counters,
    # indices), kept on the host as TF keeps int32: the cond and body were compiled so
    # (Func.host_ints), and the predicate of a counter's compare is then a host value.
    on_device = "GPU" in ctx.device
    host_ints = [k for k in body.int_feeds() if k < n] if on_device else ()
    if on_device:  # (the inputs are in host memory already: partition)
        for k in host_ints:
            vals[k] = to_host(vals[k])
        c_ints, b_ints = cond.int_feeds(), body.int_feeds()
        ccaps = [to_host(v) if n + j in c_ints else v for j, v in enumerate(ccaps)]
        bcaps = [to_host(v) if n + j in b_ints else v for j, v in enumerate(bcaps)]
    checks = [(k, inv) for k, inv in enumerate(shapes) if inv is not None]
    i = 0
    while limit is None or i < limit:
        p = cond.call(ctx, vals + ccaps, True)[0]
        if not (bool(p) if p.__class__ in _HOST_PREDICATES else bool(np.asarray(to_host(p)))):
            break
        new = body.call(ctx, vals + bcaps, True)
        kept = ()
        if len(new) > n:  # the taped tensors the gradient reads
            kept = new[n:]
            del new[n:]
        if tape is not None:
            tape.append((vals, kept))
        for k in host_ints:  # a host scalar stays a host array; a body that made its
            if new[k].__class__ is not np.ndarray:  # counter on the device: back to the host
                new[k] = np.asarray(to_host(new[k]))
        vals = [v if v.__class__ is np.ndarray else _loop_value(v, on_device) for v in new]
        for k, inv in checks:
            v = vals[k]
            if v.__class__ is np.ndarray and v.shape == inv:
                continue  # exactly the invariant
            if not inv and getattr(v, "_tv_loop_value", False):
                continue  # a TensorArray's value: a scalar
            _check_shape(v, inv, k, frame)
        i += 1
    return tuple(vals) + (tape,)


_HOST_PREDICATES = (np.bool_, np.ndarray, bool)  # a predicate bool() reads as it is


def _loop_value(v, on_device: bool):
    """A body output as the next iteration's value: an array on the loop's device (a kernel
    may return a NumPy scalar)."""
    if type(v) is np.ndarray or is_device_array(v) or getattr(v, "_tv_loop_value", False):
        return v  # an array, or a TensorArray's value (carried as is)
    v = np.asarray(v)
    return to_device(v) if on_device else v


def _shape_str(shape) -> str:
    if shape is None:
        return "<unknown>"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


for _t, _stateful in (("While", True), ("StatelessWhile", False)):
    register_op(_t, _while_shape, _while_kernel, grad=_while_grad, stateful=_stateful,
                needs_ctx=True, foldable=False)
# One other device's copy of a loop frame that spans devices (made by the partition pass:
# tensorvm.passes.partition.split_frames); no outputs: the loop op on its home outputs.
register_op("WhileShard", lambda inputs, attrs: [], _while_kernel, stateful=True,
            needs_ctx=True, foldable=False)
