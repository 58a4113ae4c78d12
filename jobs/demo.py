"""The demo (``make run``, ``tensorvm demo``): what tensorvm does, each result checked.

1. **A word count** (the bundled ``wordcount`` map-reduce job) over generated text — several
   files, many splits, 4 reducers — with the CLI's live display (on a terminal) and its
   counters, checked against ``collections.Counter``.
2. **Ridge regression trained with a parameter server** (:func:`ridge`, the bundled ``ridge``
   job, the lecture demo): the closed form ``beta = (X^T X + lambda I)^-1 X^T y`` in-graph with
   the data on a worker device and the solve on the PS device, then the same penalised loss
   minimised by gradient descent with ``tv.train`` (the variable on the PS, the gradients on
   the worker), its loss falling step by step; both checked against NumPy.

Where: on the cluster of ``tensorvm up`` when one is up (the job pages stay on its dashboard
after the demo), else on a LocalCluster of its own (1 PS + 1 worker) that it starts; on a
terminal it then waits for Enter before closing that cluster and its dashboard, and elsewhere
(CI runs ``make run`` with no stdin) it closes it at once. ``--in-process``: no cluster.
Both jobs run through the CLI's own machinery (:class:`tensorvm.jobs.runner.JobRun`, the live
display, the summary), as ``tensorvm run wordcount`` / ``tensorvm run ridge`` would.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time

import numpy as np


def ridge_graph(tv, X, y, lam, g=None):
    n, d = X.shape
    g = tv.Graph() if g is None else g
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


def ridge(steps: int = 200, n: int = 200, d: int = 5, lam: float = 0.1,
          report_every: int = 10, seed: int = 42, session=None) -> dict:
    """Ridge regression in-graph (closed form) and by gradient descent, checked against NumPy.

    Args:
        steps: gradient-descent steps.
        n: rows of the generated data.
        d: features.
        lam: the L2 penalty.
        report_every: steps per submission (the loss is reported after each, at every
            multiple of it); the first submissions are shorter (1, 1, 2, 4... steps, up to
            the first multiple), so the loss shows its fall.
        seed: the data's random seed.
    """
    import tensorvm as tv

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
    want = np.linalg.solve(X.T @ X + lam * np.eye(d), X.T @ y)
    own = session is None
    session = session or tv.Session(graph=tv.Graph())
    g, init, train, beta, beta_closed, loss = ridge_graph(tv, X, y, lam, session.graph)
    try:
        with g.as_default():
            closed = session.run(beta_closed).ravel()
            session.run(init)
            done = 0
            while done < steps:  # submissions of 1, 1, 2, 4... steps, then report_every
                k = min(report_every - done % report_every, steps - done, max(1, done))
                _, value = session.run([train, loss], steps=k) if k > 1 else \
                    session.run([train, loss])
                done += k
                tv.job.report(step=done, total_steps=steps, loss=float(value))
            fitted, final_loss = session.run([beta, loss])
    finally:
        if own:
            session.close()
    fitted = fitted.ravel()
    rel = float(np.linalg.norm(fitted - want) / np.linalg.norm(want))
    rel_closed = float(np.linalg.norm(closed - want) / np.linalg.norm(want))
    return {"ok": bool(np.allclose(closed, want, rtol=1e-8) and rel < 1e-4),
            "loss": float(final_loss), "rel_error_closed": rel_closed,
            "rel_error_descent": rel, "beta_numpy": want.tolist(),
            "beta_closed": closed.tolist(), "beta_descent": fitted.tolist()}


DEMO_SPEC = {"ps": 1, "worker": 1}


def make_text(folder: str, files: int = 4, lines: int = 10_000, vocab: int = 3000,
              seed: int = 7) -> list[str]:
    """Generated text, ``files`` files of ``lines`` lines (Zipf-distributed words, a few per
    line): their paths."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(vocab)])
    paths = []
    for f in range(files):
        counts = rng.integers(3, 15, size=lines)
        picks = words[(rng.zipf(1.2, size=int(counts.sum())) - 1) % vocab]
        ends = np.cumsum(counts)
        text = "\n".join(" ".join(picks[e - c:e]) for c, e in zip(counts, ends)) + "\n"
        path = os.path.join(folder, f"part-{f:02d}.txt")
        with open(path, "w") as fh:
            fh.write(text)
        paths.append(path)
    return paths


def _run(name: str, kw: dict, where: dict, err, out, record=None):
    """One bundled job through the CLI's machinery: ``(result, summary)``."""
    from .bundled import resolve
    from .display import LiveDisplay, print_summary
    from .runner import JobRun
    from .local_up import fresh_state
    run = JobRun(resolve(name), args=kw, **where)
    if record is not None:  # keep every reported metric, for the loss curve
        report = run.report
        run.report = lambda m: (record.append(dict(m)), report(m))
    with run:
        fresh_state(run.client)  # (on a tensorvm up cluster: a clean one, as tensorvm run does)
        if err.is_terminal:
            with LiveDisplay(run, err):
                result = run.call(kw)
        else:
            result = run.call(kw)
        summary = run.finish("done", result)
    shown = {k: v for k, v in summary.items() if k not in ("result", "result_total", "lines")}
    print_summary(shown, out)  # the result: checked against its reference below
    return result, summary


def word_count(where: dict, err, out, folder: str) -> bool:
    paths = make_text(folder)
    size = sum(os.path.getsize(p) for p in paths)
    print(f"\n[1/2] word count: {len(paths)} files, {size / 1e6:.1f} MB of generated text, "
          f"64 kB splits, 4 reducers", flush=True)
    result, _ = _run("wordcount", {"input": os.path.join(folder, "*.txt"), "num_reducers": 4,
                                   "split_size": 64 * 1024}, where, err, out)
    want = collections.Counter()
    for p in paths:
        with open(p) as fh:
            want.update(fh.read().split())
    got = result.to_dict()
    ok = got == dict(want)
    top = ", ".join(f"{w} {n}" for w, n in want.most_common(3))
    print(f"word count {'OK' if ok else 'MISMATCH'}: {len(got)} distinct words, "
          f"{sum(got.values())} words (most common: {top}); collections.Counter counts "
          f"{len(want)} distinct, {sum(want.values())} words", flush=True)
    return ok


def ps_training(where: dict, err, out, steps: int) -> bool:
    print(f"\n[2/2] ridge regression trained with a parameter server: beta on /job:ps, "
          f"gradients on /job:worker, {steps} steps of gradient descent", flush=True)
    losses: list[dict] = []
    out_, _ = _run("ridge", {"steps": steps, "report_every": max(1, steps // 20)}, where,
                   err, out, record=losses)
    curve = [(m["step"], m["loss"]) for m in losses if "loss" in m]
    shown = curve if len(curve) <= 8 else curve[:4] + curve[-3:]
    print("loss by step: " + "  ".join(f"{s}: {v:.4g}" for s, v in shown), flush=True)
    falling = all(b[1] <= a[1] * (1 + 1e-9) for a, b in zip(curve, curve[1:]))
    ok = bool(out_["ok"]) and falling
    print(f"ridge {'OK' if ok else 'MISMATCH'}: loss {curve[0][1]:.4g} -> {curve[-1][1]:.4g}"
          f"{'' if falling else ' (not falling)'}; relative error vs NumPy's closed form: "
          f"closed form in-graph {out_['rel_error_closed']:.1e}, gradient descent "
          f"{out_['rel_error_descent']:.1e}", flush=True)
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tensorvm-demo", description=__doc__.splitlines()[0])
    ap.add_argument("--in-process", action="store_true",
                    help="run in this process instead of on a cluster")
    ap.add_argument("--steps", type=int, default=200, help="gradient-descent steps")
    args = ap.parse_args(argv)
    from rich.console import Console

    from .local_up import cluster_for, page_link
    err, out = Console(stderr=True), Console()
    t0 = time.perf_counter()
    print("tensorvm demo: a word count and a parameter-server training job, each checked "
          "against a reference", flush=True)
    cluster, up = None, None if args.in_process else cluster_for(DEMO_SPEC)
    if args.in_process:
        where = {"in_process": True}
    elif up:
        where = {"scheduler": up["address"]}
        print(f"on the tensorvm up cluster at {up['address']}; job pages: {page_link(up)}",
              flush=True)
    else:
        from tensorvm.runtime.cluster.spec import ClusterSpec
        from tensorvm.runtime.cluster.local import start_local_cluster
        print("starting a LocalCluster (ps=1,worker=1)...", flush=True)
        cluster = start_local_cluster(ClusterSpec(DEMO_SPEC))
        where = {"scheduler": cluster.scheduler_address}
        print(f"dashboard: {cluster.dashboard_link.rsplit('/status', 1)[0]}/tensorvm",
              flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="tensorvm-demo-") as folder:
            ok = word_count(where, err, out, folder)
        ok = ps_training(where, err, out, args.steps) and ok
        print(f"\n{'OK' if ok else 'MISMATCH'} in {time.perf_counter() - t0:.1f} s", flush=True)
        if cluster is not None:
            _close_when_read(cluster)
    finally:
        if cluster is not None:
            cluster.close()
    return 0 if ok else 1


def _close_when_read(cluster) -> None:
    """On a terminal, keep the dashboard up until Enter; elsewhere say how to keep one."""
    link = f"{cluster.dashboard_link.rsplit('/status', 1)[0]}/tensorvm"
    if sys.stdin is not None and sys.stdin.isatty() and sys.stdout.isatty():
        try:
            input(f"job pages: {link} - press Enter to close the dashboard ")
        except (EOFError, KeyboardInterrupt):
            print()
    else:
        print("not on a terminal: closing the cluster and its dashboard now (tensorvm up "
              "starts a cluster whose job pages stay)", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
