"""Ridge regression, the lecture demo, trained with parameter servers and checked against the
closed form ``beta = (X^T X + lambda I)^-1 X^T y``.

Each of ``workers`` workers holds one slice of the rows (on its device) and computes the
gradient of its share of the penalised loss; ``sync=True`` averages the workers' gradients on
the PS each step (``SyncReplicasOptimizer``: exactly full-batch gradient descent), ``sync=False``
lets them update asynchronously. ``beta`` lives on the PS.

>>> from tensorvm.jobs.ridge import closed_form, make_data
>>> X, y = make_data(n=50, d=3, seed=0)
>>> closed_form(X, y, 0.1).shape
(3,)
"""
from __future__ import annotations

import numpy as np


def make_data(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)


def closed_form(X, y, lam: float) -> np.ndarray:
    return np.linalg.solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ y)


def ridge(workers: int = 2, sync: bool = True, steps: int = 300, n: int = 2000, d: int = 10,
          lam: float = 0.1, steps_per_run: int = 20, seed: int = 0, session=None) -> dict:
    """Ridge regression on 1 PS + ``workers`` workers against the closed form.

    Args:
        workers: worker tasks; each holds n / workers rows.
        sync: average the workers' gradients each step (exact full-batch descent).
        steps: global steps.
        n: rows of the generated data.
        d: features.
        lam: the L2 penalty.
        steps_per_run: steps per message to a worker (sync: each waits for its token inside
            the message, on the direct data plane).
        seed: the data's seed.
    """
    import tensorvm as tv
    from tensorvm.train.replicas import run_replicas
    X, y = make_data(n, d, seed)
    want = closed_form(X, y, lam)
    lr = 0.5 / (np.linalg.eigvalsh(X.T @ X).max() / n + lam / n)

    def model_fn(ctx):
        rows = slice(ctx.task * n // ctx.num_workers, (ctx.task + 1) * n // ctx.num_workers)
        g = tv.get_default_graph()
        with g.device(None), g.device(ctx.device):
            Xk = tv.Variable(X[rows], trainable=False, name="X",
                             collections=["local_variables"])
            yk = tv.Variable(y[rows].reshape(-1, 1), trainable=False, name="y",
                             collections=["local_variables"])
        beta = tv.Variable(np.zeros((d, 1)), name="ridge_beta")
        resid = tv.matmul(Xk.value(), beta) - yk.value()
        # worker k's share: its rows' squared error over all n, and 1/workers of the penalty
        loss = (tv.reduce_sum(resid * resid) * ctx.num_workers +
                lam * tv.reduce_sum(beta * beta)) / n
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(lr)}

    spec = {"ps": 1, "worker": workers}
    own = session is None
    if own:
        session = tv.Session(cluster=tv.train.ClusterSpec(spec), graph=tv.Graph(),
                             verbose=False)
    try:
        r = run_replicas(model_fn, spec, session=session, sync=sync, last_step=steps,
                         steps_per_run=steps_per_run, job_name="ridge-ps",
                         final=lambda ctx, g: {"beta": g.get_tensor_by_name("ridge_beta:0")})
    finally:
        if own:
            session.close()
    fitted = r.final["beta"].ravel()
    rel = float(np.linalg.norm(fitted - want) / np.linalg.norm(want))
    return {"ok": rel < 1e-3, "mode": "sync" if sync else "async", "rel_error": rel,
            "global_step": r.global_step, "steps_per_s": r.steps_per_s,
            "beta": fitted.tolist(), "beta_closed_form": want.tolist()}
