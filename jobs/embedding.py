"""A sparse embedding model with parameter servers: matrix factorisation of ratings whose item
ids follow a Zipf law, with an item table of ``vocab`` (>= 100k) rows and a user table, both
partitioned over 2 PS tasks (``fixed_size_partitioner``), trained asynchronously by
``workers`` workers.

Each step looks up the batch's rows only (``embedding_lookup`` gathers on the PS that holds
each part); the gradient stays ``IndexedSlices`` from the worker to the PS, is deduplicated on
the worker and applied with a scatter update (Adagrad's sparse rule). So the bytes sent to the
PS per step depend on the batch's distinct rows, not on ``vocab``:
:func:`bytes_to_ps_per_step` traces one step of the same model at two vocabulary sizes and the
job reports both.

How well it can learn: the item ids follow Zipf(1.2) over ``vocab``, so about a fifth of the
held-out ratings are of items seen fewer than 5 times in training, whose factors stay near
their start; the job reports the held-out error on all ratings and on those of items seen at
least ``HEAD_MIN_COUNT`` times (where it approaches the noise). The defaults give each user
about 180 training ratings for its 16 factors (10,000 users would give 18: a user's factors
are then barely determined and the held-out error stalls near 0.7).

>>> from tensorvm.jobs.embedding import make_ratings
>>> users, items, r = make_ratings(1000, 50, 200, dim=4, seed=0)
>>> int(items.max()) < 200, users.shape == r.shape
(True, True)
"""
from __future__ import annotations

import numpy as np


def make_ratings(count: int, users: int, vocab: int, dim: int, seed: int, noise: float = 0.1):
    """``count`` ratings: users uniform, items Zipf(1.2) over ``vocab``, rating = the true
    factors' dot product + noise."""
    rng = np.random.default_rng([seed, 7])
    U = rng.normal(0, 1 / np.sqrt(dim), (users, dim)).astype(np.float32)
    V = rng.normal(0, 1.0, (vocab, dim)).astype(np.float32)
    rng = np.random.default_rng([seed, 8, count])
    u = rng.integers(0, users, count)
    i = (rng.zipf(1.2, count) - 1) % vocab
    r = np.einsum("nd,nd->n", U[u], V[i]) + noise * rng.normal(size=count)
    return u.astype(np.int64), i.astype(np.int64), r.astype(np.float32)


HEAD_MIN_COUNT = 20


def _model(tv, u, i, r, users, vocab, dim, lr, device, batch_size):
    from tensorvm.train.replicas import cycling_batch
    part = tv.train.fixed_size_partitioner(2)
    rng = np.random.default_rng(1)  # the same start in every replica's graph
    U = tv.train.partitioned_variable(
        "mf_users", (users, dim), partitioner=part,
        initializer=rng.normal(0, 0.1, (users, dim)).astype(np.float32))
    V = tv.train.partitioned_variable(
        "mf_items", (vocab, dim), partitioner=part,
        initializer=rng.normal(0, 0.1, (vocab, dim)).astype(np.float32))
    ub, ib, rb = cycling_batch([u, i, r], batch_size, device=device)
    eu = tv.nn.embedding_lookup(U, ub, partition_strategy="div")
    ev = tv.nn.embedding_lookup(V, ib, partition_strategy="div")
    pred = tv.reduce_sum(eu * ev, axis=1)
    # summed over the batch: each touched row's gradient does not shrink with the batch
    loss = tv.reduce_sum((pred - rb) ** 2)
    return loss, tv.train.AdagradOptimizer(lr), (U, V)


def bytes_to_ps_per_step(vocab: int, batch_size: int = 256, dim: int = 16,
                         users: int = 1000, ids_vocab: int | None = None) -> int:
    """Bytes one training step sends to the PS devices (traced, in process, 2 PS devices).
    The batch's item ids are drawn over ``ids_vocab`` rows (default ``vocab``): the same
    ``ids_vocab`` at two table sizes is the same batch."""
    import tensorvm as tv
    u, i, r = make_ratings(batch_size, users, ids_vocab or vocab, dim, seed=1)
    g = tv.Graph()
    with g.as_default(), tv.device(tv.train.replica_device_setter(
            ps_tasks=2, worker_device="/job:worker/task:0")):
        loss, opt, _ = _model(tv, u, i, r, users, vocab, dim, 0.1, "/job:worker/task:0",
                              batch_size)
        train = opt.minimize(loss)  # as the replicas train it
        init = [tv.global_variables_initializer(),
                tv.variables_initializer(g.get_collection("local_variables"))]
    md = tv.RunMetadata()
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(train, options=tv.RunOptions(trace=True), run_metadata=md)
    return int(sum(x["bytes"] or 0 for x in md.sends if "/job:ps/" in x["dst"]))


def embedding(workers: int = 2, vocab: int = 100_000, users: int = 1000, dim: int = 16,
              ratings: int = 200_000, steps: int = 2000, batch_size: int = 256,
              lr: float = 0.1, steps_per_run: int = 50, seed: int = 0, session=None) -> dict:
    """Matrix factorisation with a ``vocab``-row item table over 2 PS tasks, async.

    Args:
        workers: worker tasks (a LocalCluster of 2 PS + this many is started without a
            session).
        vocab: item-table rows (partitioned over the 2 PS tasks).
        users: user-table rows.
        dim: embedding width.
        ratings: generated ratings (90% for training, split over the workers).
        steps: global steps.
        batch_size: ratings per worker step.
        lr: Adagrad learning rate.
        steps_per_run: steps per submission.
        seed: the data's seed.
    """
    import tensorvm as tv
    from tensorvm.train.replicas import run_replicas
    u, i, r = make_ratings(ratings, users, vocab, dim, seed)
    cut = int(0.9 * ratings)
    hold = (u[cut:], i[cut:], r[cut:])
    head = np.bincount(i[:cut], minlength=vocab)[hold[1]] >= HEAD_MIN_COUNT

    def model_fn(ctx):
        sl = slice(ctx.task, cut, ctx.num_workers)
        loss, opt, _ = _model(tv, u[sl], i[sl], r[sl], users, vocab, dim, lr, ctx.device,
                              batch_size)
        return {"loss": loss, "optimizer": opt, "batch_size": batch_size}

    def final(ctx, g):
        return {n: [g.get_tensor_by_name(f"{n}/part_{k}:0") for k in range(2)]
                for n in ("mf_users", "mf_items")}

    def errors(values):
        Uf, Vf = (np.concatenate(values[n]) for n in ("mf_users", "mf_items"))
        return (np.einsum("nd,nd->n", Uf[hold[0]], Vf[hold[1]]) - hold[2]) ** 2

    def mse(values):
        return float(np.mean(errors(values)))

    spec = {"ps": 2, "worker": workers}
    own = session is None
    if own:
        session = tv.Session(cluster=tv.train.ClusterSpec(spec), graph=tv.Graph(),
                             verbose=False)
    curve = []
    try:
        r_ = run_replicas(model_fn, spec, session=session, sync=False, last_step=steps,
                          steps_per_run=steps_per_run, final=final, job_name="embedding-mf",
                          monitor=lambda s, v: curve.append((s, mse(v))) and False,
                          monitor_every=max(steps // 5, 1))
    finally:
        if own:
            session.close()
    # the same batch against a table 4x larger: the bytes must not change
    small, large = bytes_to_ps_per_step(vocab), bytes_to_ps_per_step(vocab * 4, ids_vocab=vocab)
    first = float(np.mean(hold[2] ** 2))  # the all-zero model's error
    last = mse(r_.final)
    return {"ok": last < 0.9 * first and small == large, "global_step": r_.global_step,
            "steps_per_s": r_.steps_per_s, "heldout_mse_start": first,
            "heldout_mse": last, "curve": curve,
            f"heldout_mse_items_seen_{HEAD_MIN_COUNT}x": float(np.mean(errors(r_.final)[head])),
            f"heldout_share_items_seen_{HEAD_MIN_COUNT}x": float(np.mean(head)),
            "bytes_to_ps_per_step": small,
            f"bytes_to_ps_per_step_vocab_{vocab * 4}": large}
