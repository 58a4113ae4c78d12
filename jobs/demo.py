"""The main demo job (``make run``): ridge regression, the lecture demo, on a LocalCluster.

The closed form ``beta = (X^T X + lambda I)^-1 X^T y`` is computed in-graph with the data on a
worker device and the solve on a parameter-server device, then the same penalised loss is
minimised by gradient descent with ``tv.train`` (variables on the PS, gradients on the worker),
and both are compared with NumPy. Prints the result and the Dask dashboard link.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def ridge_graph(tv, X, y, lam):
    n, d = X.shape
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:worker/task:0"):
            Xt = tv.constant(X, dtype=tv.float64, name="X")
            yt = tv.constant(y.reshape(-1, 1), dtype=tv.float64, name="y")
            xtx = tv.matmul(Xt, Xt, transpose_a=True, name="XtX")
            xty = tv.matmul(Xt, yt, transpose_a=True, name="Xty")
        with tv.device("/job:ps/task:0"):
            beta_closed = tv.matmul(tv.matrix_inverse(xtx + lam * tv.eye(d, dtype=tv.float64)),
                                    xty, name="beta_closed")
            beta = tv.Variable(np.zeros((d, 1)), name="beta")
        with tv.device("/job:worker/task:0"):
            resid = tv.matmul(Xt, beta) - yt
            loss = (tv.reduce_sum(resid * resid) + lam * tv.reduce_sum(beta * beta)) / n
        lr = 0.5 / (np.linalg.eigvalsh(X.T @ X).max() / n + lam / n)
        train = tv.train.GradientDescentOptimizer(lr).minimize(loss)
        init = tv.global_variables_initializer()
    return g, init, train, beta, beta_closed, loss


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tensorvm-demo", description=__doc__.splitlines()[0])
    ap.add_argument("--in-process", action="store_true",
                    help="run in this process instead of on a LocalCluster")
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args(argv)
    import tensorvm as tv

    rng = np.random.default_rng(42)
    n, d, lam = 200, 5, 0.1
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
    want = np.linalg.solve(X.T @ X + lam * np.eye(d), X.T @ y)

    g, init, train, beta, beta_closed, loss = ridge_graph(tv, X, y, lam)
    target = None if args.in_process else "local"
    spec = None if args.in_process else tv.train.ClusterSpec({"ps": 1, "worker": 1})
    t0 = time.perf_counter()
    with tv.Session(target, graph=g, cluster=spec) as sess:
        closed = sess.run(beta_closed).ravel()
        sess.run(init)
        sess.run(train, steps=args.steps)
        fitted, final_loss = sess.run([beta, loss])
        link = sess.dashboard_link
        plan = sess.plan(train)
    fitted = fitted.ravel()
    rel = np.linalg.norm(fitted - want) / np.linalg.norm(want)
    print(plan)
    print(f"ridge regression, n={n}, d={d}, lambda={lam}")
    print(f"  NumPy closed form      : {np.array2string(want, precision=5)}")
    print(f"  tensorvm closed form   : {np.array2string(closed, precision=5)}")
    print(f"  tensorvm gradient desc.: {np.array2string(fitted, precision=5)} "
          f"({args.steps} steps, loss {float(final_loss):.5f})")
    rel_closed = np.linalg.norm(closed - want) / np.linalg.norm(want)
    print(f"  relative error vs NumPy: closed {rel_closed:.2e}, descent {rel:.2e}")
    print(f"  wall time {time.perf_counter() - t0:.1f} s")
    if link:
        print(f"  dashboard: {link}")
    ok = np.allclose(closed, want, rtol=1e-8) and rel < 1e-4
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
