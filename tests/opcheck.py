"""Shared checks for op tests: forward results against NumPy, gradients against finite
differences (float64, central differences), through a real ``tv.Session``."""
from __future__ import annotations

import numpy as np

import tensorvm as tv


def run(fetches, feed_dict=None):
    with tv.Session() as sess:
        return sess.run(fetches, feed_dict)


def check_forward(build, np_fn, *arrays, rtol=1e-6, atol=1e-8, **kw):
    """``build(*tensors) -> tensor``; compares with ``np_fn(*arrays)``, feeding placeholders."""
    g = tv.Graph()
    with g.as_default():
        phs = [tv.placeholder(tv.as_dtype(a.dtype), a.shape) for a in arrays]
        out = build(*phs)
        with tv.Session(graph=g) as sess:
            got = sess.run(out, dict(zip(phs, arrays)))
    want = np_fn(*arrays)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, **kw)
    return got


def numeric_grad(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    x = x.astype(np.float64).copy()
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        hi = f(x)
        flat[i] = old - eps
        lo = f(x)
        flat[i] = old
        gflat[i] = (hi - lo) / (2 * eps)
    return g


def check_gradients(build, *arrays, wrt=None, rtol=1e-5, atol=1e-6, eps=1e-6):
    """Check ``tv.gradients(sum(build(*xs) * w), xs)`` against central finite differences.

    ``w`` is a fixed random weighting so that every output element matters. ``wrt`` lists the
    indices of the inputs to differentiate (default: all float inputs).
    """
    arrays = [np.asarray(a) for a in arrays]
    wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"] if wrt is None else wrt
    g = tv.Graph()
    with g.as_default():
        phs = [tv.placeholder(tv.as_dtype(a.dtype), a.shape) for a in arrays]
        out = build(*phs)
        sess = tv.Session(graph=g)
        feed = dict(zip(phs, arrays))
        # A fixed random weighting, shaped like the evaluated output (its static shape may be
        # unknown), so that every output element matters.
        out_shape = np.shape(sess.run(out, feed))
        w = np.random.default_rng(0).uniform(0.5, 1.5, size=out_shape)
        w_ph = tv.placeholder(out.dtype, out_shape)
        feed[w_ph] = w
        loss = tv.reduce_sum(out * w_ph)
        grads = tv.gradients(loss, [phs[i] for i in wrt])
        got = sess.run([tv.convert_to_tensor(gr) if not isinstance(gr, tv.IndexedSlices)
                        else tv.densify(gr, phs[i]) for gr, i in zip(grads, wrt)], feed)
        for k, i in enumerate(wrt):
            def f(xi, i=i):
                fd = dict(feed)
                fd[phs[i]] = xi
                return float(sess.run(loss, fd))
            want = numeric_grad(f, arrays[i], eps)
            np.testing.assert_allclose(got[k], want, rtol=rtol, atol=atol,
                                       err_msg=f"gradient wrt input {i}")
        sess.close()
