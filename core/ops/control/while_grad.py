"""The gradient of a ``While`` loop (``back_prop=True``): ``tv.gradients`` of the body inside
the body's own graph makes the gradient function, the forward loop tapes the body's tensors
that function reads (TF's gradient stacks), and the ``WhileGrad`` op's kernel walks the tape
backwards, running the gradient program once per iteration and summing the gradients of the
body's captured tensors. A loop across worker processes keeps one tape per device and its
gradient runs in shards (``WhileGradShard``, :mod:`tensorvm.ops.control.while_frames`).
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...vm.kernels.array_api import array_namespace
from .while_frames import SHARDED_TAPE, home_tape, in_dask_worker, run_sharded_grad
from .while_func import Func

__all__: list[str] = []


def _while_grad(op, *grads):
    from ..gradients import densify, gradients
    from ..array.array_ops import placeholder, zeros_like
    a = op.attrs
    n, ncc, nbc = a["n"], a["ncc"], a["nbc"]
    nones = [None] * len(op.inputs)
    if not a["back_prop"]:
        return nones
    body: Func = a["body"]
    fg = body.graph
    if fg is None:
        raise InvalidArgumentError(f"while_loop {a['frame']!r}: its body graph is gone (a "
                                   "loop read back from a GraphDef has no gradient)")
    phs = [fg.get_tensor_by_name(f"{nm}:{i}") for nm, i in body.feeds]
    outs = [fg.get_tensor_by_name(f"{nm}:{i}") for nm, i in body.fetches]
    fv = [i for i in range(n) if op.outputs[i].dtype.is_differentiable]
    fc = [j for j in range(nbc) if phs[n + j].dtype.is_differentiable]
    if not fv or all(grads[i] is None for i in fv):
        return nones
    with fg.as_default():
        first_new = len(fg._ops)
        gys = [placeholder(outs[i].dtype, outs[i]._shape, name="grad_y") for i in fv]
        xs = [phs[i] for i in fv] + [phs[n + j] for j in fc]
        dxs = gradients([outs[i] for i in fv], xs, grad_ys=gys)
        dxs = [zeros_like(x) if d is None else densify(d, x) for d, x in zip(dxs, xs)]
    # The body's own tensors the gradient ops read are taped by the forward loop (TF's
    # gradient stacks) and fed to the gradient program, which then does not recompute them.
    taped = _taped_reads(fg._ops[first_new:], body)
    tape_idx = body.tape([(t.op.name, t.value_index) for t in taped])
    gfunc = Func(fg, phs + gys + taped, dxs, a["frame"] + "/grad", op.location)
    body.grads.append(gfunc)
    g_in = [zeros_like(op.outputs[i]) if grads[i] is None else densify(grads[i], op.outputs[i])
            for i in fv]
    bcaps = list(op.inputs[n + ncc:n + ncc + nbc])
    gop = apply_op("WhileGrad", bcaps + [op.outputs[n]] + g_in,
                   {"grad": gfunc, "nbc": nbc, "nv": len(fv), "fc": tuple(fc),
                    "frame": a["frame"], "tape_idx": tuple(tape_idx)}, name="WhileGrad")
    out = list(nones)
    for k, i in enumerate(fv):
        out[i] = gop.outputs[k]
    for k, j in enumerate(fc):
        out[n + ncc + j] = gop.outputs[len(fv) + k]
    return out


def _taped_reads(grad_ops, body: Func) -> list[Tensor]:
    """Tensors of the body's forward ops (not its inputs, not constants) that ``grad_ops``
    read, in first-read order."""
    feeds = {nm for nm, _ in body.feeds}
    out: dict[Tensor, None] = {}
    for gop in grad_ops:
        for t in gop.inputs:
            name = t.op.name
            if name in body.nodes and name not in feeds and t.op.type != "Const":
                out[t] = None
    return list(out)


def _while_grad_shape(inputs, attrs):
    nbc = attrs["nbc"]
    g_in = inputs[nbc + 1:]
    return [(t.dtype, t._shape) for t in g_in] + \
        [(inputs[j].dtype, inputs[j]._shape) for j in attrs["fc"]]


def _while_grad_kernel(ctx, *ins, grad, nbc, nv, fc, frame, tape_idx=(), frame_devices=(),
                       home=None):
    if frame_devices:  # split by the partition pass (a loop across devices)
        if in_dask_worker():
            return run_sharded_grad(ctx, ins, grad=grad, nbc=nbc, nv=nv, fc=fc, frame=frame,
                                    tape_idx=tape_idx, home=home or ctx.device,
                                    devices=frame_devices)
        if home is not None:  # in process the home's kernel runs every device's part
            return ()
    bcaps = list(ins[:nbc])
    tape = ins[nbc]
    gys = list(ins[nbc + 1:])
    acc = [None] * len(fc)
    if tape is None:
        raise InvalidArgumentError(f"while_loop {frame!r} was built with back_prop=False")
    if tape is SHARDED_TAPE:  # the loop ran sharded; its gradient runs here only
        tape = home_tape(ctx, frame)
    owned = [False] * len(fc)  # acc[k] is an array this kernel made (summed into in place)
    for vals, kept in reversed(tape):
        out = grad.call(ctx, vals + bcaps + gys + [kept[i] for i in tape_idx], True)
        gys = out[:nv]
        for k in range(len(fc)):
            s, d = acc[k], out[nv + k]
            if s is None:
                acc[k] = d
            elif owned[k] and d.__class__ is np.ndarray and s.shape == d.shape and \
                    s.dtype == d.dtype:
                np.add(s, d, out=s)  # the same sums as s + d, without a new array each time
            else:
                acc[k] = s = s + d
                owned[k] = s.__class__ is np.ndarray
    acc = [array_namespace(bcaps[j]).zeros_like(bcaps[j]) if s is None else s
           for s, j in zip(acc, fc)]
    out = tuple(gys) + tuple(acc)
    return out[0] if len(out) == 1 else out  # one output: its value, not a 1-tuple


register_op("WhileGrad", _while_grad_shape, _while_grad_kernel, needs_ctx=True,
            foldable=False)
register_op("WhileGradShard", lambda inputs, attrs: [], _while_grad_kernel, stateful=True,
            needs_ctx=True, foldable=False)
