"""Asynchronous training on a changing cluster (issue 26): ``tv.train.run_replicas(sync=False)``
on the ClusterCoordinator, on a cluster started by hand (``dask scheduler``; ``ps-0``,
``worker-0``, ``worker-1``, one thread each), three ways:

* ``undisturbed`` — both workers throughout;
* ``killed`` — ``kill -9`` of worker-1 (its Nanny too) at a third of the steps, restarted by
  name 1 s later (target: wall time <= 1.25x undisturbed, every update counted once: the global
  step equals the runs made and the exactly-once guard's ``applied``);
* ``joined`` — the run begins with worker-0 alone and worker-1 is started 3 s in (target:
  global steps/s once worker-1 takes steps >= 1.6x the rate before);
* ``sync_undisturbed``, ``sync_killed`` — the same two for ``run_replicas(sync=True)``, two
  gradients a step (no backup worker), ``--sync-steps`` global steps: the killed run waits
  for the restarted worker-1 (a step needs its gradient); every step applied once when the
  accumulators accepted global steps x 2 gradients and handed out one set a step.

The model is logistic regression (:mod:`tensorvm.jobs.logreg`'s data: ``--rows`` rows x
``--features`` in two shards, one read on each worker, minibatch 128, plain SGD lr 0.05), one
step a run (``steps_per_run=1``: each run carries a step token; ``--steps-per-run K``: K steps
a scheduled run, one message, each step still its own ``token#k``), ``--steps`` global steps;
the held-out log-loss of the final weights is printed beside the true model's, and the CPU a
global step cost each process (``cpu_ms_per_step``; with it, the most a second worker can
raise steps/s on this machine's cores).

Run: ``python -m bench.bench_training_elastic [--steps N] [--sync-steps N] [--rows N]
[--features N] [--steps-per-run K] [--rounds R] [--only KIND] [--tf-python PY]`` (R rounds
of the kinds, interleaved: medians; the machine is shared). With ``--tf-python``, TF 1.x's own
async steps/s with one worker and with two on the same cores, beside the join row.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

SPEC = {"ps": 1, "worker": 2}
KINDS = ("undisturbed", "killed", "joined", "sync_undisturbed", "sync_killed")


def _hand_cluster(folder: Path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from hand_cluster import HandCluster
    return HandCluster(folder)


def _model(rows: int, features: int, seed: int = 0):
    import tensorvm as tv
    from tensorvm.jobs.logreg import make_shard
    shards = [make_shard(seed, s, rows // 2, features) for s in range(2)]

    def model_fn(ctx):
        X, y = shards[ctx.task % 2]
        xb, yb = tv.train.cycling_batch([X, y], 128, device=ctx.device)
        w = tv.Variable(np.zeros(features, np.float32), name="w")
        b = tv.Variable(np.float32(0.0), name="b")
        logits = tv.reduce_sum(xb * w, axis=1) + b
        loss = tv.reduce_mean(tv.nn.sigmoid_cross_entropy_with_logits(labels=yb, logits=logits))
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(0.05),
                "batch_size": 128}
    return model_fn


def _final(ctx, g):
    return {"w": g.get_tensor_by_name("w:0"), "b": g.get_tensor_by_name("b:0")}


def _cpu(hc) -> dict:
    """``{name: (pid, CPU seconds so far)}`` of every process of the run: the cluster's
    (:meth:`HandCluster.cpu_seconds`) and this driver's."""
    import os
    import resource
    me = resource.getrusage(resource.RUSAGE_SELF)
    return {**hc.cpu_seconds(), "driver": (os.getpid(), me.ru_utime + me.ru_stime)}


def _cpu_per_step(before: dict, after: dict, steps: int) -> dict:
    """Milliseconds of CPU a global step cost each process that ran to the end (a worker
    started during the run counts from its start; a killed one's CPU is lost with it)."""
    out = {}
    for name, (pid, t) in after.items():
        pid0, t0 = before.get(name, (pid, 0.0))
        out[name] = round((t - (t0 if pid0 == pid else 0.0)) / max(steps, 1) * 1e3, 3)
    return out


def run(hc, kind: str, steps: int, rows: int, features: int, steps_per_run: int = 1) -> dict:
    import tensorvm as tv
    sync = kind.startswith("sync_")
    names = ("ps-0", "worker-0", "worker-1")
    for name in names:
        p = hc.procs.get(name)
        if p is None or p.poll() is not None:
            hc.start_worker(name)
    hc.wait_for(names)
    tv.Session.reset(hc.address)
    # made with every task there (a session maps its whole ClusterSpec when made)
    sess = tv.Session(hc.address, cluster=SPEC, graph=tv.Graph(), verbose=False)
    if kind == "joined":
        hc.stop_worker("worker-1")
    events: dict = {}
    t0 = [None]
    first_run: dict = {}

    class FirstRun(tv.train.SessionRunHook):
        def __init__(self, task):
            self.task = task

        def after_run(self, run_context, run_values):
            first_run.setdefault(self.task, time.monotonic())

    def kill_and_restart():
        hc.kill("worker-1")
        events["killed"] = time.monotonic()
        time.sleep(1.0)
        hc.start_worker("worker-1")
        events["restarted"] = time.monotonic()

    seen: list = []  # (global step, time.monotonic()) at each monitor call

    def monitor(step, values):
        seen.append((step, time.monotonic()))
        if t0[0] is None:
            t0[0] = time.monotonic()
        if kind.endswith("killed") and "kill" not in events and step >= steps // 3:
            events["kill"] = step
            threading.Thread(target=kill_and_restart, daemon=True).start()
        if kind == "joined" and "start" not in events and time.monotonic() - t0[0] >= 3.0:
            events["start"] = time.monotonic()
            hc.start_worker("worker-1")
        return False

    cpu0 = _cpu(hc)
    with sess:
        r = tv.train.run_replicas(_model(rows, features), SPEC, session=sess, sync=sync,
                                  last_step=steps, final=_final, monitor=monitor,
                                  monitor_every=50, steps_per_run=steps_per_run,
                                  hooks_fn=lambda ctx: [FirstRun(ctx.task)])
    cpu = _cpu_per_step(cpu0, _cpu(hc), r.global_step)
    from tensorvm.jobs.logreg import B_TRUE, log_loss, make_shard, true_weights
    Xh, yh = make_shard(0, 10_000, 20_000, features)
    out = {"kind": kind, "wall_s": round(r.wall_s, 3), "global_step": r.global_step,
           "runs": sum(r.worker_runs), "steps_by_worker": r.steps_by_worker,
           "counters": r.counters, "recoveries": r.recoveries,
           "heldout_loss": round(log_loss(Xh, yh, r.final["w"], r.final["b"]), 5),
           "true_loss": round(log_loss(Xh, yh, true_weights(0, features), B_TRUE), 5),
           "cpu_ms_per_step": cpu}
    if sync:
        out["exactly_once"] = (r.counters.get("taken") == r.global_step and
                               r.counters.get("accepted") == 2 * r.global_step)
    else:
        # every step's update applied once: the global step is the guard's count, and the
        # runs made carried that many steps (K a run; a run's last may carry fewer)
        runs = out["runs"]
        out["exactly_once"] = (r.global_step == r.counters.get("applied", -1) and
                               (runs - 1) * steps_per_run < r.global_step <= runs * steps_per_run)
    if kind == "joined" and 1 in first_run:
        # global steps/s from the monitor's history, before worker-1's first step and after
        join = first_run[1]
        before = [(s, t) for s, t in seen if t <= join]
        after = [(s, t) for s, t in seen if t >= join]
        if len(before) >= 2 and len(after) >= 2:
            rb = (before[-1][0] - before[0][0]) / (before[-1][1] - before[0][1])
            ra = (after[-1][0] - after[0][0]) / (after[-1][1] - after[0][1])
            out.update(join_s=round(join - t0[0], 2), steps_per_s_before=round(rb, 1),
                       steps_per_s_after=round(ra, 1), speedup_after_join=round(ra / rb, 2))
    return out


def _cpu_bound(runs: list, before_rates: list) -> str:
    """The CPU a global step costs each process (medians over ``runs``), and what that allows
    a second worker: steps/s need (w + o) CPU-ms a step (w: the worker's, o: the PS's, the
    driver's, the scheduler's), so with C cores they stay under C / (w + o) however many
    workers take steps; a joined worker raises the one-worker rate r1 by at most
    min(2, C / ((w + o) r1))."""
    import os
    names = sorted({n for r in runs for n in r["cpu_ms_per_step"]})
    med = {n: statistics.median(r["cpu_ms_per_step"].get(n, 0.0) for r in runs) for n in names}
    w = sum(v for n, v in med.items() if n.startswith("worker-"))
    o = sum(v for n, v in med.items() if not n.startswith("worker-"))
    cores = os.cpu_count() or 1
    per = ", ".join(f"{n} {v:.3f}" for n, v in med.items())
    line = (f"CPU ms per global step, undisturbed (medians): {per}; {cores} cores allow at "
            f"most {cores / (w + o) * 1e3:.0f} steps/s")
    if before_rates:
        r1 = statistics.median(before_rates)
        line += (f"; from the {r1:.0f} steps/s of one worker, a joined worker can raise it "
                 f"by at most {min(2.0, cores / ((w + o) / 1e3 * r1)):.2f}x")
    return line


def tf_rates(python: str | None, rows: int, features: int, steps: int, rounds: int) -> str:
    """TF 1.x's own async steps/s on these cores with one worker process and with two (1 PS
    over gRPC, :mod:`bench.tf_training_peer`'s ``rate`` mode, the same model and data), and
    the rise: what the same machine gives TF when a second worker takes steps."""
    if not python:
        return "TF peer: no TensorFlow (--tf-python)"
    import os
    import subprocess
    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_training_peer.py")
    rates: dict = {1: [], 2: []}
    for _ in range(rounds):
        for n in (1, 2):
            opts = {"rows": rows, "features": features, "shards": 2, "seed": 0, "lr": 0.05,
                    "batch": 128, "holdout": 2000, "tol": 0.002, "eval_every": 100,
                    "max_steps": steps, "rate": steps // 5, "workers": n}
            try:
                out = subprocess.run([python, peer, json.dumps(opts)], capture_output=True,
                                     text=True, timeout=900, check=True).stdout
                rates[n].append(json.loads(out.strip().splitlines()[-1])["steps_per_s"])
            except (OSError, subprocess.SubprocessError, ValueError, IndexError,
                    KeyError) as exc:
                return f"TF peer failed: {exc}"
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    return (f"TF 1.x async on the same cores (medians of {rounds}): one worker {one:.0f} "
            f"steps/s, two workers {two:.0f} steps/s: {two / one:.2f}x")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--rows", type=int, default=40_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--sync-steps", type=int, default=2000)
    ap.add_argument("--steps-per-run", type=int, default=1,
                    help="steps a scheduled closure runs (one message per run; each step "
                         "keeps its own token)")
    ap.add_argument("--only", choices=KINDS, action="append")
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of each kind, interleaved; the medians are reported")
    ap.add_argument("--tf-python", default=None,
                    help="an interpreter where TensorFlow imports: prints TF 1.x's own steps/s "
                         "with one worker and with two on these cores")
    args = ap.parse_args(argv)
    kinds = args.only or list(KINDS)
    rounds: dict = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="tvm-bench-elastic-") as tmp, \
            _hand_cluster(Path(tmp)) as hc:
        for _ in range(args.rounds):
            for kind in kinds:
                steps = args.sync_steps if kind.startswith("sync_") else args.steps
                rounds[kind].append(run(hc, kind, steps, args.rows, args.features,
                                       args.steps_per_run))
                print(json.dumps(rounds[kind][-1]), flush=True)
    med = {k: statistics.median(r["wall_s"] for r in rs) for k, rs in rounds.items()}
    if "undisturbed" in rounds and "killed" in rounds:
        once = all(r["exactly_once"] for r in rounds["killed"])
        print(f"killed/undisturbed wall (medians of {args.rounds}): {med['killed']:.2f} s / "
              f"{med['undisturbed']:.2f} s = {med['killed'] / med['undisturbed']:.2f}x "
              f"(target <= 1.25x); every update applied once: {once}")
    if "sync_undisturbed" in rounds and "sync_killed" in rounds:
        once = all(r["exactly_once"] for r in rounds["sync_killed"])
        print(f"sync killed/undisturbed wall (medians of {args.rounds}): "
              f"{med['sync_killed']:.2f} s / {med['sync_undisturbed']:.2f} s = "
              f"{med['sync_killed'] / med['sync_undisturbed']:.2f}x; every step applied once "
              f"with 2 gradients: {once}")
    ups = [r["speedup_after_join"] for r in rounds.get("joined", ()) if "speedup_after_join" in r]
    if ups:
        print(f"joined: steps/s after the join {statistics.median(ups):.2f}x the rate before "
              f"(median of {len(ups)}: {', '.join(f'{u:.2f}' for u in ups)}; target >= 1.6x)")
    if rounds.get("undisturbed"):
        print(_cpu_bound(rounds["undisturbed"],
                         [r["steps_per_s_before"] for r in rounds.get("joined", ())
                          if "steps_per_s_before" in r]))
    if args.tf_python:
        print(tf_rates(args.tf_python, args.rows, args.features, args.steps, args.rounds),
              flush=True)
    return rounds


if __name__ == "__main__":
    main()
