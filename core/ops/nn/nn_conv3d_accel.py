"""Conv3D and its two gradients, and MaxPool3D's gradient, on PyTorch's kernels (the optional CPU backend,
:mod:`tensorvm.vm.kernels.cpu_accel`), as :mod:`tensorvm.ops.nn.nn_conv_accel` does for Conv2D.

With the torch backend chosen, float32 host arrays go to ``torch.nn.functional.conv3d`` and
``aten.convolution_backward`` (oneDNN): an NDHWC array seen as NCDHW is PyTorch's
``channels_last_3d`` layout, wrapped without a copy, and the result comes back as a NumPy
array in the op's data format. Other dtypes, empty arrays and device (CuPy) arrays keep the
im2col kernels of :mod:`tensorvm.ops.nn.nn_conv3d`; the two agree to float32 rounding (another
summation order). On a [4, 16, 32, 32, 16] float32 input with a 3x3x3x16x32 filter ("SAME",
one thread) the forward pass, input and filter gradients took 15, 14 and 12 ms here against
38, 60 and 43 ms on the im2col kernels, and TF 2.21's 12, 12.5 and 12.8 ms.

Padding as TF: PyTorch pads both sides alike, so an uneven "SAME" padding is done on the
array (a copy) before the call, and the input gradient is cropped from the padded one.
"""
from __future__ import annotations

import numpy as np

from ...vm.kernels import cpu_accel, threads
from .nn_conv_accel import wants

__all__ = ["conv3d", "conv3d_backprop_filter", "conv3d_backprop_input", "max_pool3d_grad",
           "wants"]


def _tensor(torch, a, df):
    t = cpu_accel.to_torch(torch, a)
    return t if df == "NCDHW" else t.permute(0, 4, 1, 2, 3)


def _filter(torch, f, shape=None):
    """DHWIO filter -> OIDHW stored channels_last_3d; with ``shape`` (only the shape is read)
    an unset tensor of it."""
    if shape is not None:
        kd, kh, kw, c, o = shape
        return torch.empty((o, c, kd, kh, kw), dtype=torch.float32,
                           memory_format=torch.channels_last_3d)
    return torch.from_numpy(np.ascontiguousarray(f.transpose(4, 0, 1, 2, 3))).permute(
        0, 4, 1, 2, 3)


def _numpy(t, df):
    return np.ascontiguousarray((t if df == "NCDHW" else t.permute(0, 2, 3, 4, 1)).numpy())


def _even(pads):
    return all(p0 == p1 for p0, p1 in pads)


def _pad(a, pads, df):
    sp = ((0, 0), (0, 0), *pads)
    return np.pad(a, sp if df == "NCDHW" else (sp[0], *sp[2:], sp[1]))


def _backward(torch, xt, ft, g, s, d, pad, df, mask):
    cpu_accel.sync_threads(torch, threads.intra_op_threads())
    return torch.ops.aten.convolution_backward(_tensor(torch, g, df), xt, ft, None, list(s),
                                               pad, list(d), False, [0, 0, 0], 1, mask)


def conv3d(x, f, s, d, pads, df):
    """``Conv3D`` of float32 ``x`` (``df``) with a DHWIO filter; ``pads`` per spatial dim."""
    torch = cpu_accel.torch()
    pad = [p0 for p0, _ in pads]
    if not _even(pads):
        x, pad = _pad(x, pads, df), [0, 0, 0]
    cpu_accel.sync_threads(torch, threads.intra_op_threads())
    out = torch.nn.functional.conv3d(_tensor(torch, x, df), _filter(torch, f), None, list(s),
                                     pad, list(d))
    return _numpy(out, df)


def conv3d_backprop_input(xs, f, g, s, d, pads, df):
    """d(conv3d)/d(x) for an input of NDHWC shape ``xs``, returned in ``df``."""
    torch = cpu_accel.torch()
    n, sp, c = xs[0], xs[1:4], xs[4]
    even = _even(pads)
    psp = sp if even else tuple(e + p0 + p1 for e, (p0, p1) in zip(sp, pads))
    xt = torch.empty(1, dtype=torch.float32).expand(n, c, *psp)  # its values are not read
    pad = [p0 for p0, _ in pads] if even else [0, 0, 0]
    dx = _numpy(_backward(torch, xt, _filter(torch, f), g, s, d, pad, df,
                          [True, False, False])[0], df)
    if not even:
        crop = tuple(slice(p0, p0 + e) for e, (p0, _) in zip(sp, pads))
        dx = np.ascontiguousarray(dx[(slice(None), slice(None), *crop)] if df == "NCDHW"
                                  else dx[(slice(None), *crop)])
    return dx


def conv3d_backprop_filter(x, fs, g, s, d, pads, df):
    """d(conv3d)/d(filter) of DHWIO shape ``fs``."""
    torch = cpu_accel.torch()
    pad = [p0 for p0, _ in pads]
    if not _even(pads):
        x, pad = _pad(x, pads, df), [0, 0, 0]
    dw = _backward(torch, _tensor(torch, x, df), _filter(torch, None, fs), g, s, d, pad, df,
                   [False, True, False])[1]
    return np.ascontiguousarray(dw.permute(2, 3, 4, 1, 0).numpy())


def max_pool3d_grad(x, g, k, s, df):
    """``MaxPool3DGrad`` of float32 ``x`` (windows ``k`` apart by strides ``s`` >= ``k``, no
    padding) for the output gradient ``g``: each window's gradient at its first maximum in
    row-major order (PyTorch's rule, TF's too), the argmax recomputed by PyTorch's pooling."""
    torch = cpu_accel.torch()
    cpu_accel.sync_threads(torch, threads.intra_op_threads())
    xt, gt = _tensor(torch, x, df), _tensor(torch, g, df)
    _, where = torch.nn.functional.max_pool3d(xt, list(k), list(s), return_indices=True)
    dx = torch.ops.aten.max_pool3d_with_indices_backward(gt, xt, list(k), list(s), [0, 0, 0],
                                                         [1, 1, 1], False, where)
    return _numpy(dx, df)
