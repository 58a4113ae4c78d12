"""Conv2D and its gradients, and MaxPool's gradient, on PyTorch's kernels (the optional CPU
backend, :mod:`tensorvm.vm.kernels.cpu_accel`).

The NumPy kernels of :mod:`tensorvm.ops.nn.nn_conv` (im2col blocks + OpenBLAS) reach about half
of TF's speed on mnist_deep's convolutions (issue 14, item 10): TF runs oneDNN's direct
convolutions, which pack nothing and copy no windows. With the torch backend chosen,
``Conv2D``, ``Conv2DBackpropInput`` and ``Conv2DBackpropFilter`` of float32 NumPy arrays run
here: ``torch.from_numpy`` wraps the arrays without a copy, an NHWC array seen as NCHW is
PyTorch's ``channels_last`` layout (what oneDNN prefers), and the results come back as NumPy
arrays in the op's own data format.

Only float32 host arrays come here: oneDNN has no float64 convolutions, and PyTorch's float64
fallback (its own im2col) measured 1.8-3.6x slower than the NumPy kernels on mnist_deep's
second layer; other dtypes, empty arrays and device (CuPy) arrays keep the NumPy (one-source)
kernels. Results are not bit-equal to the NumPy kernels (another summation order): they agree
to float32 rounding (``tests/test_conv_accel.py``).

``MaxPoolGrad`` (:func:`max_pool_grad`) recomputes each window's first maximum with PyTorch's
pooling and scatters the gradient there: TF's choice among ties, and 1.5-2x faster than the
NumPy kernel on mnist_deep (its mask has to compare every tap with the output). It takes float32
windows that neither overlap (a sum over windows would add in another order) nor pad, a finite
gradient and an output without NaN (a window whose max is
NaN gets no gradient in TF's rule, and its NaN element in PyTorch's); the rest stays on NumPy.
Elements that get no gradient are +0.0, as TF's kernel writes them (the NumPy kernel writes
``0 * g``, -0.0 under a negative ``g``: equal values).

Padding as TF: "SAME"'s odd total puts the extra row/column after; PyTorch pads both sides
alike, so an uneven padding is done on the array (a copy) before the call, and the input
gradient is cropped from the padded one.

>>> import numpy as np
>>> x = np.ones((1, 3, 3, 1), np.float32); f = np.ones((2, 2, 1, 1), np.float32)
>>> out = conv2d(x, f, [1, 1, 1, 1], "VALID", "NHWC", [1, 1, 1, 1]) if wants(x, f) else \\
...     np.full((1, 2, 2, 1), 4, np.float32)
>>> out[0, :, :, 0]
array([[4., 4.],
       [4., 4.]], dtype=float32)
"""
from __future__ import annotations

import weakref

import numpy as np

from ...vm.kernels import cpu_accel, threads
from ...framework.errors import InvalidArgumentError

__all__ = [
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "max_pool",
    "max_pool_grad",
    "wants",
]

_F32 = np.dtype(np.float32)


def wants(*arrays) -> bool:
    """Whether a convolution of these arrays runs here: float32, non-empty host (NumPy)
    arrays in native byte order, and the torch backend chosen (:func:`cpu_accel.backend`)."""
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != _F32 or a.size == 0:
            return False
    return cpu_accel.backend() == "torch"


# ---- the calls -----------------------------------------------------------------------------
def _tensor(torch, a, df):
    """``a`` (NHWC or NCHW) as an NCHW torch tensor over the same memory (NHWC: channels_last;
    read-only arrays shared too: torch only reads them)."""
    t = cpu_accel.to_torch(torch, a)
    return t if df == "NCHW" else t.permute(0, 3, 1, 2)


def _filter(torch, f, values=True):
    """HWIO filter -> OIHW, stored channels_last (oneDNN's layout; a small copy). Without
    ``values`` (the filter gradient reads only its shape) an unset tensor of its shape."""
    kh, kw, c, o = f.shape
    if not values:
        return torch.empty((o, c, kh, kw), dtype=torch.float32,
                           memory_format=torch.channels_last)
    # OHWI in memory is OIHW channels_last
    return torch.from_numpy(np.ascontiguousarray(f.transpose(3, 0, 1, 2))).permute(0, 3, 1, 2)


def _numpy(t, df):
    """An NCHW torch result as a NumPy array in ``df``."""
    a = (t if df == "NCHW" else t.permute(0, 2, 3, 1)).numpy()
    return np.ascontiguousarray(a)


class _Shape:
    """Stands in for an array where only ``.shape`` is read."""
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = shape


def _geometry(xs, fs, strides, padding, df, dilations):
    """((sh, sw), (dh, dw), (pt, pb), (pl, pr)) of one call, as the NumPy kernels work it out
    (their errors included)."""
    from .nn_conv import _geometry as geo
    n, h, w, c = xs if df == "NHWC" else (xs[0], xs[2], xs[3], xs[1])
    if fs[2] != c:
        raise InvalidArgumentError(f"input depth {c} != filter in_channels {fs[2]}")
    sh, sw, dh, dw, _, _, ph, pw = geo(_Shape((n, h, w, c)), fs[0], fs[1], strides, padding,
                                       df, dilations)
    return (sh, sw), (dh, dw), ph, pw


def _pad(a, ph, pw, df):
    """``a`` padded by ``ph``/``pw`` (H and W of ``df``), for an uneven padding torch cannot
    express."""
    hw = ((0, 0), (0, 0), (ph[0], ph[1]), (pw[0], pw[1]))
    return np.pad(a, hw if df == "NCHW" else (hw[0], hw[2], hw[3], hw[1]))


def _even(ph, pw):
    return ph[0] == ph[1] and pw[0] == pw[1]


def _padded_input(x, f, strides, padding, data_format, dilations):
    """``(x, strides, dilations, padding)`` for torch: an even padding is torch's own, an
    uneven one is done on ``x`` (a copy) and torch pads nothing."""
    st, di, ph, pw = _geometry(x.shape, f.shape, strides, padding, data_format, dilations)
    if _even(ph, pw):
        return x, st, di, [ph[0], pw[0]]
    return _pad(x, ph, pw, data_format), st, di, [0, 0]


def conv2d(x, f, strides, padding, data_format, dilations):
    """``Conv2D`` of float32 ``x`` (``data_format``) and an HWIO filter ``f``."""
    torch = cpu_accel.torch()
    x, st, di, pad = _padded_input(x, f, strides, padding, data_format, dilations)
    cpu_accel.sync_threads(torch, threads.intra_op_threads())
    out = torch.nn.functional.conv2d(_tensor(torch, x, data_format), _filter(torch, f), None,
                                     st, pad, di)
    return _numpy(out, data_format)


def _backward(torch, xt, f, g, st, di, pad, data_format, mask):
    cpu_accel.sync_threads(torch, threads.intra_op_threads())
    gt = _tensor(torch, g, data_format)
    ft = _filter(torch, f, values=mask[0])  # the input gradient reads the filter's values
    # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    #  output_padding, groups, output_mask)
    return torch.ops.aten.convolution_backward(gt, xt, ft, None, list(st), pad, list(di), False,
                                               [0, 0], 1, mask)


def conv2d_backprop_input(x, f, g, strides, padding, data_format, dilations):
    """``Conv2DBackpropInput``: d(conv2d)/d(x) for upstream ``g`` (only ``x``'s shape is read)."""
    torch = cpu_accel.torch()
    st, di, ph, pw = _geometry(x.shape, f.shape, strides, padding, data_format, dilations)
    n, c = x.shape[0], x.shape[1 if data_format == "NCHW" else 3]
    h, w = x.shape[2:] if data_format == "NCHW" else x.shape[1:3]
    even = _even(ph, pw)
    hp, wp = (h, w) if even else (h + ph[0] + ph[1], w + pw[0] + pw[1])
    # the input's values are not read: an expanded scalar of its (padded) shape stands in
    # (oneDNN takes the layout from the gradient's)
    xt = torch.empty(1, dtype=torch.float32).expand(n, c, hp, wp)
    pad = [ph[0], pw[0]] if even else [0, 0]
    dx = _backward(torch, xt, f, g, st, di, pad, data_format, [True, False, False])[0]
    dx = _numpy(dx, data_format)
    if not even:
        sl = (slice(None), slice(ph[0], ph[0] + h), slice(pw[0], pw[0] + w))
        dx = np.ascontiguousarray(dx[sl[:1] + (slice(None),) + sl[1:]] if data_format == "NCHW"
                                  else dx[sl])
    return dx


def conv2d_backprop_filter(x, f, g, strides, padding, data_format, dilations):
    """``Conv2DBackpropFilter``: d(conv2d)/d(f), HWIO (only ``f``'s shape is read)."""
    torch = cpu_accel.torch()
    x, st, di, pad = _padded_input(x, f, strides, padding, data_format, dilations)
    dw = _backward(torch, _tensor(torch, x, data_format), f, g, st, di, pad, data_format,
                   [False, True, False])[1]
    return np.ascontiguousarray(dw.permute(2, 3, 1, 0).numpy())


def _argmaxes() -> dict:
    """This task's max-pool argmaxes: ``id(output) -> (weakref to the input, weakref to the
    output, indices)`` (the thread's task scratch, emptied when its next task starts)."""
    sc = threads.scratch()
    got = getattr(sc, "pool_argmax", None)
    if got is None:
        got = sc.pool_argmax = {}
    return got


def max_pool(x, kh, kw, sh, sw):
    """``MaxPool`` of NHWC float32 ``x`` (windows ``kh x kw`` apart by strides ``sh, sw``, no
    padding): NHWC. The maximum is exact, so the values are the NumPy kernel's (NaN windows
    and the first of tied zeros included). Each window's argmax is kept for the step's
    ``MaxPoolGrad`` of the same input and output (TF's oneDNN pooling keeps a workspace so):
    the gradient then only scatters."""
    torch = cpu_accel.torch()
    cpu_accel.sync_threads(torch, threads.intra_op_threads())
    yt, where = torch.nn.functional.max_pool2d(_tensor(torch, x, "NHWC"), (kh, kw), (sh, sw),
                                               return_indices=True)
    y = _numpy(yt, "NHWC")
    _argmaxes()[id(y)] = (weakref.ref(x), weakref.ref(y), where)
    return y


def max_pool_grad(x, y, g, kh, kw, sh, sw):
    """``MaxPoolGrad`` of NHWC float32 ``x`` (MaxPool's input, windows ``kh x kw`` by strides
    ``sh, sw``, no padding) and ``y`` (its output) for the output gradient ``g``: NHWC, each
    window's gradient at its first maximum in row-major order. The argmax kept by
    :func:`max_pool` of this ``x`` and ``y`` is used when there is one, else recomputed."""
    torch = cpu_accel.torch()
    cpu_accel.sync_threads(torch, threads.intra_op_threads())
    xt, gt = _tensor(torch, x, "NHWC"), _tensor(torch, g, "NHWC")
    kept = _argmaxes().get(id(y))
    if kept is not None and kept[0]() is x and kept[1]() is y:
        where = kept[2]
    else:
        _, where = torch.nn.functional.max_pool2d(xt, (kh, kw), (sh, sw), return_indices=True)
    dx = torch.ops.aten.max_pool2d_with_indices_backward(gt, xt, [kh, kw], [sh, sw], [0, 0],
                                                         [1, 1], False, where)
    return _numpy(dx, "NHWC")
