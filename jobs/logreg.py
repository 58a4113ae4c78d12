"""Logistic regression with parameter servers: 1 PS + ``workers`` workers, async or sync.

The benchmark's problem (issue 12): ``X`` (``rows`` x ``features`` float32 ~ N(0, 1)) in
``shards`` shards, ``w* ~ N(0, 0.3^2)``, ``b* = 0.25``, ``y ~ Bernoulli(sigmoid(X w* + b*))``;
``w = 0, b = 0`` at start; plain SGD; worker ``k`` reads shards ``k, k + workers, ...``. Each
shard is generated *on its worker* (a ``py_func`` initialiser seeded by the shard number), so
no data crosses the network. Training stops when the held-out log-loss (``holdout`` rows,
evaluated on the client about every ``eval_every`` global steps) is within ``tolerance`` of
the true model's, or at ``steps``.

>>> from tensorvm.jobs.logreg import make_shard
>>> X, y = make_shard(seed=0, shard=1, rows=4, features=3)
>>> X.shape, y.tolist() == make_shard(0, 1, 4, 3)[1].tolist()
((4, 3), True)
"""
from __future__ import annotations

import time

import numpy as np

B_TRUE = 0.25


def true_weights(seed: int, features: int) -> np.ndarray:
    return np.random.default_rng([seed, 0]).normal(0.0, 0.3, features).astype(np.float32)


def make_shard(seed: int, shard: int, rows: int, features: int):
    """Shard ``shard`` of the data: ``(X, y)``, the same wherever it is generated."""
    rng = np.random.default_rng([seed, 1, shard])
    X = rng.standard_normal((rows, features), dtype=np.float32)
    p = 1.0 / (1.0 + np.exp(-(X @ true_weights(seed, features) + B_TRUE)))
    return X, (rng.random(rows) < p).astype(np.float32)


def log_loss(X, y, w, b) -> float:
    z = X @ np.asarray(w, np.float64) + float(b)
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def _worker_data(seed, shard_ids, rows_per_shard, features):
    xs, ys = zip(*(make_shard(seed, s, rows_per_shard, features) for s in shard_ids))
    return np.concatenate(xs), np.concatenate(ys)


def write_shards(url: str, rows: int, features: int, shards: int, seed: int) -> list[str]:
    """Write the data as ``shards`` ``.npy`` files of rows ``[x..., y]`` under ``url``."""
    import io

    import fsspec
    per, out = rows // shards, []
    fs, path = fsspec.core.url_to_fs(url)
    fs.makedirs(path, exist_ok=True)
    for s in range(shards):
        X, y = make_shard(seed, s, per, features)
        buf = io.BytesIO()
        np.save(buf, np.concatenate([X, y[:, None]], axis=1))
        fs.pipe(f"{path.rstrip('/')}/shard-{s:05d}.npy", buf.getvalue())
        out.append(f"{url.rstrip('/')}/shard-{s:05d}.npy")
    return out


def _split_model_fn(input: str, features: int, batch_size: int, lr: float, seed: int):
    """Workers lease ``.npy`` splits of ``input`` from one split queue on the PS."""
    import tensorvm as tv
    from tensorvm.train.replicas import split_batches

    def model_fn(ctx):
        g = tv.get_default_graph()
        with g.device(None), g.device("/job:ps/task:0"):
            q = tv.train.split_input_producer(f"{input.rstrip('/')}/*.npy", format="npy",
                                              seed=seed, shared_name="logreg-splits")
        batch, reload = split_batches(q, features + 1, batch_size, device=ctx.device)
        xb, yb = batch[:, :features], batch[:, features]
        w = tv.Variable(np.zeros(features, np.float32), name="logreg_w")
        b = tv.Variable(np.float32(0.0), name="logreg_b")
        logits = tv.reduce_sum(xb * w, axis=1) + b
        loss = tv.reduce_mean(tv.nn.sigmoid_cross_entropy_with_logits(labels=yb, logits=logits))
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(lr),
                "batch_size": batch_size, "reload": reload}
    return model_fn


def model_fn_for(seed: int, rows: int, features: int, shards: int, batch_size: int, lr: float):
    """The replica model for :func:`tensorvm.train.run_replicas`."""
    import tensorvm as tv
    from tensorvm.train.replicas import cycling_batch
    per = rows // shards

    def model_fn(ctx):
        mine = list(range(ctx.task, shards, ctx.num_workers))
        n = per * len(mine)
        g = tv.get_default_graph()
        with g.device(None), g.device(ctx.device), g.name_scope("data"):
            X, y = tv.py_func(lambda: _worker_data(seed, mine, per, features), [],
                              [tv.float32, tv.float32], name="generate")
            Xv = tv.Variable(X, shape=(n, features), trainable=False, name="X",
                             collections=["local_variables"])
            yv = tv.Variable(y, shape=(n,), trainable=False, name="y",
                             collections=["local_variables"])
        xb, yb = cycling_batch([Xv, yv], batch_size, device=ctx.device)
        w = tv.Variable(np.zeros(features, np.float32), name="logreg_w")
        b = tv.Variable(np.float32(0.0), name="logreg_b")
        logits = tv.reduce_sum(xb * w, axis=1) + b
        loss = tv.reduce_mean(tv.nn.sigmoid_cross_entropy_with_logits(labels=yb, logits=logits))
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(lr),
                "batch_size": batch_size}
    return model_fn


def logreg(workers: int = 2, sync: bool = False, steps: int = 20000,
           rows: int = 1_000_000, features: int = 100, shards: int = 8,
           batch_size: int = 128, lr: float = 0.05, steps_per_run: int = 50,
           holdout: int = 50_000, tolerance: float = 0.002, eval_every: int = 100,
           seed: int = 0, input: str = "", session=None) -> dict:
    """Train logistic regression on 1 PS + ``workers`` workers until the held-out log-loss is
    within ``tolerance`` of the true model's (or ``steps`` global steps).

    Args:
        workers: worker tasks (a LocalCluster of 1 PS + this many is started without a
            session).
        sync: synchronous replicas (SyncReplicasOptimizer), else asynchronous (Hogwild).
        steps: the most global steps.
        rows: training rows, generated on the workers.
        features: columns of X.
        shards: data shards (worker k reads k, k + workers, ...).
        batch_size: rows per worker step.
        lr: SGD learning rate.
        steps_per_run: async steps per submission.
        holdout: held-out rows (on the client) for the target.
        tolerance: target = true model's held-out log-loss + tolerance.
        eval_every: global steps between evaluations.
        seed: the data's seed.
        input: a folder of ``.npy`` shards (``write_shards``; one the workers can read, e.g.
            ``file://`` on one machine or ``s3://``): the workers lease its splits from a
            split queue on the PS instead of generating fixed shards.
    """
    import tensorvm as tv
    from tensorvm.train.replicas import run_replicas
    Xh, yh = make_shard(seed, 10_000, holdout, features)
    Xh = Xh.astype(np.float64)  # once: log_loss would convert it at every evaluation
    target = log_loss(Xh, yh, true_weights(seed, features), B_TRUE) + tolerance
    spec = {"ps": 1, "worker": workers}
    own = session is None
    if own:
        session = tv.Session(cluster=tv.train.ClusterSpec(spec), graph=tv.Graph(),
                             verbose=False)
    reached = {}

    def monitor(step, values):
        loss = log_loss(Xh, yh, values["w"], values["b"])
        tv.job.report(step=step, total_steps=steps, heldout_loss=loss)
        if loss <= target and not reached:
            reached.update(step=step, loss=loss)
        return loss <= target

    t0 = time.perf_counter()
    try:
        r = run_replicas(
            _split_model_fn(input, features, batch_size, lr, seed) if input else
            model_fn_for(seed, rows, features, shards, batch_size, lr), spec, session=session,
            sync=sync, last_step=steps, steps_per_run=steps_per_run,
            final=lambda ctx, g: {"w": g.get_tensor_by_name("logreg_w:0"),
                                  "b": g.get_tensor_by_name("logreg_b:0")},
            monitor=monitor, monitor_every=eval_every, job_name=f"logreg-{workers}w")
    finally:
        if own:
            session.close()
    seconds = time.perf_counter() - t0
    at = next((t for s, t, done in r.history if done), None)
    final = log_loss(Xh, yh, r.final["w"], r.final["b"])
    return {"ok": bool(reached), "mode": "sync" if sync else "async", "workers": workers,
            "global_step": r.global_step, "seconds_to_target": at, "seconds": seconds,
            "target_loss": target, "heldout_loss": final, "steps_per_s": r.steps_per_s,
            "worker_runs": r.worker_runs}
