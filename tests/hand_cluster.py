"""A Dask cluster started by hand, as an operator starts one: a ``dask scheduler`` process and
named ``dask worker --name worker-N --nthreads 1`` processes on 127.0.0.1, each leading its
own process group (the worker's Nanny and the worker process it spawned), so a test or a
benchmark can kill one (``kill -9``), stop and continue it, or start one mid-job.

    with HandCluster(folder) as hc:
        hc.start_worker("worker-0"); hc.start_worker("worker-1"); hc.wait_for(2)
        s = tv.Session(hc.address, graph=tv.Graph(), verbose=False)
        ...
        hc.kill("worker-1"); hc.start_worker("worker-1")   # restarted by name

The process handling is :mod:`test_external_cluster`'s (``_spawn``, ``_read_address``,
``_stop``); the ``hand_cluster`` fixture gives a module one two-worker cluster.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_external_cluster import _read_address, _spawn, _stop


class HandCluster:
    """A scheduler and named worker processes started with the ``dask`` CLI; ``folder`` holds
    the scheduler file and one log per process; ``memory_limit``: every worker's
    ``--memory-limit`` (default: Dask's)."""

    def __init__(self, folder: Path, memory_limit: str | None = None):
        self.folder = Path(folder)
        self.memory_limit = memory_limit
        self.folder.mkdir(parents=True, exist_ok=True)
        self._sched_file = self.folder / "scheduler.json"
        self._scheduler = _spawn(["scheduler", "--host", "127.0.0.1", "--port", "0",
                                  "--no-dashboard", "--scheduler-file", str(self._sched_file)],
                                 self.folder / "scheduler.log")
        self.procs: dict[str, subprocess.Popen] = {}
        self._client = None
        try:
            self.address = _read_address(self._sched_file, self._scheduler)
        except BaseException:
            _stop(self._scheduler)
            raise

    def start_worker(self, name: str, nthreads: int = 1) -> subprocess.Popen:
        """Start ``dask worker --name name`` (a restart by name when it ran before); returns at
        once — :meth:`wait_for` waits until the scheduler knows it."""
        old = self.procs.get(name)
        if old is not None and old.poll() is None:
            raise RuntimeError(f"worker {name} is still running")
        args = ["worker", "--scheduler-file", str(self._sched_file), "--name", name,
                "--nthreads", str(nthreads), "--no-dashboard", "--host", "127.0.0.1",
                "--death-timeout", "60"]
        if self.memory_limit is not None:
            args += ["--memory-limit", str(self.memory_limit)]
        log = self.folder / f"{name}-{len(list(self.folder.glob(f'{name}*.log')))}.log"
        self.procs[name] = _spawn(args, log)
        return self.procs[name]

    @property
    def client(self):
        """A Dask client of the cluster (for looking, not for running jobs)."""
        if self._client is None:
            from distributed import Client
            self._client = Client(self.address, set_as_default=False, timeout="30s")
        return self._client

    def workers(self) -> dict:
        """Worker name -> address, as the scheduler knows them now."""
        info = self.client.sync(self.client.scheduler.identity, n_workers=-1)
        return {str(w["name"]): a for a, w in info["workers"].items()}

    def wait_for(self, names, timeout: float = 60.0, gone=()) -> None:
        """Wait until the scheduler knows every worker in ``names`` and none in ``gone``."""
        deadline = time.monotonic() + timeout
        while True:
            have = set(self.workers())
            if set(names) <= have and not set(gone) & have:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers {sorted(have)}; waited for {sorted(names)}, "
                                   f"and for {sorted(gone)} to leave")
            time.sleep(0.05)

    def signal(self, name: str, sig: int) -> None:
        """Send ``sig`` to worker ``name``'s process group (its Nanny and worker process):
        SIGKILL is ``kill -9``, SIGSTOP/SIGCONT pause and continue it."""
        os.killpg(self.procs[name].pid, sig)

    def kill(self, name: str) -> None:
        """``kill -9`` worker ``name`` (Nanny included: nothing restarts it) and reap it."""
        self.signal(name, signal.SIGKILL)
        self.procs[name].wait(10)

    def stop_worker(self, name: str) -> None:
        """Stop worker ``name`` cleanly (SIGTERM) and wait until the scheduler lets it go."""
        _stop(self.procs[name])
        self.wait_for((), gone=(name,))

    def cpu_seconds(self) -> dict:
        """``{name: (pid, CPU seconds)}``: the CPU (user + system) used so far by the scheduler
        and by each worker that is running (its Nanny and worker process together)."""
        import psutil
        out = {}
        for name, p in [("scheduler", self._scheduler), *self.procs.items()]:
            if p.poll() is not None:
                continue
            try:
                top = psutil.Process(p.pid)
                out[name] = (p.pid, sum(sum(q.cpu_times()[:2])
                                        for q in [top, *top.children(recursive=True)]))
            except psutil.Error:  # it ended meanwhile
                continue
        return out

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGCONT)  # a stopped process ignores SIGTERM
            _stop(p)
        _stop(self._scheduler)

    def __enter__(self) -> "HandCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@pytest.fixture(scope="module")
def hand_cluster(tmp_path_factory):
    """One hand-started cluster for the module: a scheduler and ``worker-0``, ``worker-1``
    (one thread each). A test that kills, stops or removes a worker brings it back before it
    ends (:func:`restore`)."""
    with HandCluster(tmp_path_factory.mktemp("hand-cluster")) as hc:
        for name in ("worker-0", "worker-1"):
            hc.start_worker(name)
        hc.wait_for(("worker-0", "worker-1"))
        yield hc


def restore(hc: HandCluster, names=("worker-0", "worker-1")) -> None:
    """Bring the workers ``names`` back: continue a stopped one, start a missing one."""
    for name in names:
        p = hc.procs.get(name)
        if p is not None and p.poll() is None:
            hc.signal(name, signal.SIGCONT)
        else:
            hc.start_worker(name)
    hc.wait_for(names)
