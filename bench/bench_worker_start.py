"""How soon a ``dask worker`` started mid-job is useful to tensorvm (issue 23's "worker joining"
and "worker killed and restarted" rows are bounded by it).

    python bench/bench_worker_start.py [--rounds 5]

A cluster started by hand (:mod:`hand_cluster` of the tests): ``dask scheduler``,
``worker-0``, and a session that has registered tensorvm's worker plugin. Each round starts
``dask worker --name worker-1`` and times, from that command's start:

* ``registered``: the scheduler lists worker-1 (its Nanny and worker process have started;
  tensorvm's worker plugin, whose unpickling imports tensorvm in the worker, is set up as the
  worker handles the scheduler's reply, so it may still be importing);
* ``first step``: a step on ``/job:worker/task:1`` (a 64x64 matmul and a sum, mapped onto
  worker-1 by name; the session connected before worker-1 started) has returned.

``import tensorvm``: how long that import took in worker-1 (``-X importtime`` in its log; it
runs in the worker's event loop, as the plugin is unpickled). Then: the first step's own time (mapping the device onto worker-1 waits for the worker's event
loop, so a worker still importing tensorvm shows here), the first task's compute time on
worker-1 (Dask's task stream: the task run cold), the second step's own time (warm, on the
direct plane), and which of the modules ``import tensorvm`` leaves for later the worker had
imported by then. worker-1 is killed (``kill -9``) at the end of each round. Medians over the
rounds.

To compare with another checkout, run this file with ``PYTHONPATH`` pointing at a folder whose
``tensorvm`` is that checkout (the workers inherit the environment).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from distributed import get_task_stream

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]
from hand_cluster import HandCluster  # noqa: E402

import tensorvm as tv  # noqa: E402

LATER = ("tensorvm.train", "tensorvm.estimator", "tensorvm.tf_api.data", "tensorvm.tf_api.app",
         "tensorvm.storage.checkpoint")


def _later_modules():
    import sys
    return sorted(m for m in LATER if m in sys.modules)


class Steps:
    """A session's step on ``/job:worker/task:<task>``."""

    def __init__(self, address: str, task: int):
        self.graph = tv.Graph()
        with self.graph.as_default(), tv.device(f"/job:worker/task:{task}"):
            x = tv.placeholder(tv.float32, [64, 64])
            self.y = tv.reduce_sum(tv.matmul(x, x))
        self.feed = {x: np.ones((64, 64), np.float32)}
        self.session = tv.Session(address, graph=self.graph, verbose=False)

    def run(self) -> float:
        t = time.perf_counter()
        assert self.session.run(self.y, self.feed) == 64.0 ** 3
        return time.perf_counter() - t


def _import_s(log: str) -> float:
    """The seconds ``import tensorvm`` took in a process whose log holds ``-X importtime``."""
    found = re.findall(r"import time:\s+\d+ \|\s+(\d+) \| +tensorvm\n", log)
    return int(found[0]) / 1e6 if found else float("nan")


def one_round(hc: HandCluster) -> dict:
    steps = Steps(hc.address, 1)  # connected before worker-1 starts: not timed
    os.environ["PYTHONPROFILEIMPORTTIME"] = "1"  # worker-1's imports, timed into its log
    t0 = time.perf_counter()
    try:
        hc.start_worker("worker-1")
    finally:
        del os.environ["PYTHONPROFILEIMPORTTIME"]
    hc.wait_for(("worker-1",))
    registered = time.perf_counter() - t0
    with get_task_stream(client=hc.client) as stream:
        first = steps.run()
    done = time.perf_counter() - t0
    compute = sum(s["stop"] - s["start"] for t in stream.data for s in t["startstops"]
                  if s["action"] == "compute")
    second = steps.run()
    address = hc.workers()["worker-1"]
    later = hc.client.run(_later_modules, workers=[address])[address]
    steps.session.close()
    hc.kill("worker-1")
    hc.wait_for((), gone=("worker-1",))
    log = max(hc.folder.glob("worker-1-*.log"), key=lambda p: p.stat().st_mtime).read_text()
    return {"registered": registered, "import tensorvm": _import_s(log),
            "first step": done, "first step's own": first, "first task's compute": compute,
            "second step's own": second, "later modules": later}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    print(f"tensorvm from {tv.__file__}")
    with tempfile.TemporaryDirectory() as folder, HandCluster(Path(folder)) as hc:
        hc.start_worker("worker-0")
        hc.wait_for(("worker-0",))
        Steps(hc.address, 0).run()  # the worker plugin is registered: a joining worker gets it
        rows = [one_round(hc) for _ in range(args.rounds)]
    for key in ("registered", "import tensorvm", "first step", "first step's own",
                "first task's compute", "second step's own"):
        values = [r[key] for r in rows]
        print(f"{key:>21}: median {statistics.median(values):.3f} s  "
              f"({', '.join(f'{v:.3f}' for v in values)})")
    print(f"{'later modules':>21}: {rows[-1]['later modules']} (in worker-1 after its step)")


if __name__ == "__main__":
    main()
