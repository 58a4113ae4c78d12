"""The fast paths of the max-pool and ReLU kernels (issue 14, item 10) pinned bit for bit to
their general forms: the blocked exact-tiling MaxPool against the tap-by-tap maximum over the
padded input, ReluGrad against ``g * (x > 0)``; ties, signed zeros, NaN and infinities
included, several blocks, NCHW. No timings here (``bench/bench_tf_programs.py`` measures)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.ops.nn import nn_conv
from tensorvm.framework.op_registry import registry

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _numpy_kernels():
    """The NumPy kernels' own paths, not the optional PyTorch ones (tensorvm.vm.kernels.cpu_accel: the
    same values, but a tie of -0.0 and 0.0 keeps the first there; tests/test_cpu_accel.py)."""
    from tensorvm.vm.kernels import cpu_accel
    cpu_accel.set_backend("numpy")
    yield
    cpu_accel.set_backend(None)


def _general_max_pool(x, k, s, padding):
    """MaxPool of NHWC ``x`` by the general path: the taps' maximum over the padded input."""
    kh, kw = k
    attrs = (1, kh, kw, 1), (1, *s, 1), padding, "NHWC"
    x, kh, kw, (sh, sw, _, _, oh, ow, ph, pw) = nn_conv._pool_setup(x, *attrs)
    xp = nn_conv._pad(x, ph, pw, -np.inf)
    return nn_conv._window_max(xp, nn_conv._tap_slices(kh, kw, sh, sw, oh, ow))


def _awkward(xs, dtype=np.float32):
    """ReLU-like values with many ties (zeros of both signs), a NaN and infinities."""
    x = np.maximum(RNG.standard_normal(xs), 0).round(1).astype(dtype)
    flat = x.reshape(-1)
    flat[::7] = -0.0
    flat[3] = np.nan
    flat[5] = np.inf
    flat[-2] = -np.inf
    return x


def _bits(a):
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("xs,k", [((5, 8, 8, 32), (2, 2)), ((3, 6, 9, 5), (3, 3)),
                                  ((2, 4, 6, 3), (2, 3)), ((2, 3, 3, 4), (1, 1)),
                                  ((4, 14, 14, 64), (2, 2))])
@pytest.mark.parametrize("block_bytes", [1, 4096, 1 << 20])
def test_tiled_max_pool_is_the_general_path_bit_for_bit(monkeypatch, xs, k, block_bytes):
    monkeypatch.setattr(nn_conv, "POOL_BLOCK_BYTES", block_bytes)  # one image to all per block
    x = _awkward(xs)
    attrs = {"ksize": (1, *k, 1), "strides": (1, *k, 1), "padding": "VALID",
             "data_format": "NHWC"}
    got = nn_conv._max_pool_kernel(x, **attrs)
    want = _general_max_pool(x, k, k, "VALID")
    assert got.shape == want.shape and _bits(got) == _bits(want)
    # SAME padding of an exactly tiled input is the same call; a view of NCHW data too
    assert _bits(nn_conv._max_pool_kernel(x, **dict(attrs, padding="SAME"))) == _bits(want)
    nchw = {"ksize": (1, 1, *k), "strides": (1, 1, *k), "padding": "VALID",
            "data_format": "NCHW"}
    got_t = nn_conv._max_pool_kernel(x.transpose(0, 3, 1, 2), **nchw)
    assert _bits(got_t) == _bits(want.transpose(0, 3, 1, 2))


def test_tiled_max_pool_values_and_first_block_edges():
    """Closed form on a ramp: each 2x2 window's max is its bottom-right element; five
    images over blocks of two check the last, shorter block."""
    x = np.arange(5 * 4 * 6 * 3, dtype=np.float32).reshape(5, 4, 6, 3)
    old = nn_conv.POOL_BLOCK_BYTES
    nn_conv.POOL_BLOCK_BYTES = 2 * x[0].nbytes
    try:
        got = nn_conv._max_pool_kernel(x, (1, 2, 2, 1), (1, 2, 2, 1), "VALID", "NHWC")
    finally:
        nn_conv.POOL_BLOCK_BYTES = old
    np.testing.assert_array_equal(got, x[:, 1::2, 1::2, :])


@pytest.mark.parametrize("xs,k,s,padding", [((2, 7, 7, 3), (2, 2), (2, 2), "SAME"),
                                            ((1, 7, 5, 2), (3, 3), (2, 2), "SAME"),
                                            ((2, 5, 6, 2), (3, 2), (1, 1), "VALID")])
def test_untiled_max_pool_is_the_window_max(xs, k, s, padding):
    """Windows that do not tile the input (odd sizes with SAME padding, overlaps) keep the
    general path: each output is the max of its window's unpadded elements."""
    x = RNG.standard_normal(xs).astype(np.float32)
    got = nn_conv._max_pool_kernel(x, (1, *k, 1), (1, *s, 1), padding, "NHWC")
    oh, ow = got.shape[1:3]
    if padding == "SAME":
        ph = max((oh - 1) * s[0] + k[0] - xs[1], 0) // 2
        pw = max((ow - 1) * s[1] + k[1] - xs[2], 0) // 2
    else:
        ph = pw = 0
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * s[0] - ph, j * s[1] - pw
            win = x[:, max(r0, 0):r0 + k[0], max(c0, 0):c0 + k[1], :]
            np.testing.assert_array_equal(got[:, i, j, :], win.max(axis=(1, 2)))


def test_max_pool_in_a_session_runs_the_tiled_path():
    x = _awkward((2, 6, 6, 4))
    with tv.Session() as s:
        got = s.run(tv.nn.max_pool(tv.constant(x), [1, 2, 2, 1], [1, 2, 2, 1], "SAME"))
    assert _bits(got) == _bits(_general_max_pool(x, (2, 2), (2, 2), "SAME"))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(50, 7, 7, 64), (3, 5), ()])
def test_relu_grad_is_g_times_the_mask_bit_for_bit(dtype, shape):
    kernel = registry["ReluGrad"].kernels["CPU"]
    g = RNG.standard_normal(shape).astype(dtype)
    x = RNG.standard_normal(shape).astype(dtype)
    if g.ndim:
        gf, xf = g.reshape(-1), x.reshape(-1)
        gf[:6] = [np.nan, np.inf, -np.inf, -0.0, -1.5, 2.0]  # NaN/inf where x <= 0 give NaN
        xf[:6] = [-1.0, 0.0, -0.0, -2.0, np.nan, 0.5]
    with np.errstate(invalid="ignore"):
        want = g * (x > 0)
        got = kernel(g, x)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert _bits(got) == _bits(want)


def test_relu_grad_broadcasts_like_the_expression():
    kernel = registry["ReluGrad"].kernels["CPU"]
    g = RNG.standard_normal((4, 3)).astype(np.float32)
    x = RNG.standard_normal((3,)).astype(np.float32)
    assert _bits(kernel(g, x)) == _bits(g * (x > 0))
