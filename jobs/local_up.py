"""A local cluster that stays up between jobs: ``tensorvm up``, ``tensorvm status``,
``tensorvm down`` (issue 25).

::

    tensorvm up [--cluster ps=1,worker=2] [--threads N]   # prints the dashboard link, returns
    tensorvm run wordcount --input ...                     # runs on it: an import and a connect
    tensorvm status                                        # up/down, address, workers, dashboard
    tensorvm down                                          # stops it, removes the state file

Design: ``up`` starts **one detached daemon process** (``python -m tensorvm.jobs.local_up
serve``, in a session of its own, so it outlives the command and a Ctrl-C in the terminal) that
holds the same cluster a ``tensorvm run`` would start for itself:
:func:`tensorvm.runtime.cluster.local.start_local_cluster` — the scheduler with the tensorvm job
registry and dashboard page in the daemon, one Nanny per task in the daemon, one worker
process per task named after it (``ps-0``, ``worker-0`` …), everything on 127.0.0.1, threads
per worker by :func:`tensorvm.runtime.cluster.local.worker_threads` (one each when the processes fill
the cores). Rather than ``dask scheduler`` + ``dask worker`` processes: one code path for
both kinds of local cluster (its GPU layout, its Nannies that always restart a killed worker),
half the processes (no separate Nanny process per worker), one start-up of Python and
distributed instead of 1 + 2N, and a single process to signal for a clean stop.

The daemon writes the **state file** when the cluster is up (atomically, mode 0600):
``$TENSORVM_STATE_DIR/cluster.json``, else ``$XDG_STATE_HOME/tensorvm/cluster.json``, else
``~/.local/state/tensorvm/cluster.json``, holding the address, the dashboard link, the spec,
the threads, the daemon's and the workers' pids (with their start times, so that a reused pid
is never taken for ours) and the log file (``cluster.log`` beside it). A state file whose
daemon is gone (killed, machine rebooted) is *stale*: every command that reads it removes it
(and stops any worker process of it still running) and says so once.

``tensorvm run`` (:func:`cluster_for`) uses the cluster when it is up and the job asked for
no cluster of its own (no ``--scheduler``, no ``--in-process``), or when its ``--cluster`` spec
fits (each job of the spec has at least that many tasks up). When it does not fit, the job
starts its own LocalCluster as before, and says so in one warning line.

``down`` sends SIGTERM to the daemon, which closes the cluster (workers first) and removes
the state file; a daemon still there after ``--timeout`` seconds is killed with its whole
process group, and any recorded worker still alive after that too.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time

import click

STATE_ENV = "TENSORVM_STATE_DIR"
DEFAULT_SPEC = {"ps": 1, "worker": 2}
logger = logging.getLogger("tensorvm")


# ---- the state file ------------------------------------------------------------------------
def state_dir() -> str:
    """Where the state file and the daemon's log live (see the module docstring)."""
    if os.environ.get(STATE_ENV):
        return os.environ[STATE_ENV]
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                             ".local", "state")
    return os.path.join(base, "tensorvm")


def state_path() -> str:
    return os.path.join(state_dir(), "cluster.json")


def spec_text(spec: dict) -> str:
    """>>> spec_text({"ps": 1, "worker": 2})
    'ps=1,worker=2'
    """
    return ",".join(f"{job}={n}" for job, n in spec.items())


def fits(up: dict, need: dict | None) -> bool:
    """Whether a cluster of tasks ``up`` can run a job that asks for ``need`` (None: any).

    >>> fits({"ps": 1, "worker": 2}, {"worker": 2}), fits({"ps": 1, "worker": 2}, {"ps": 2})
    (True, False)
    """
    return need is None or all(up.get(job, 0) >= n for job, n in need.items())


def _proc(entry: dict):
    """The psutil process of a recorded ``{"pid", "created"}`` if it is still that process."""
    import psutil
    try:
        p = psutil.Process(int(entry["pid"]))
        if abs(p.create_time() - float(entry["created"])) > 0.5:
            return None  # the pid was reused
        return None if p.status() == psutil.STATUS_ZOMBIE else p
    except (psutil.Error, KeyError, TypeError, ValueError):
        return None


def _proc_entry(pid: int) -> dict:
    import psutil
    return {"pid": pid, "created": psutil.Process(pid).create_time()}


def read_state() -> tuple[dict | None, str | None]:
    """``(state, note)``: the state of the running cluster (None when down); ``note`` says
    that a stale or unreadable state file was removed."""
    path = state_path()
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        if not isinstance(state, dict) or "address" not in state:
            raise ValueError("not a tensorvm cluster state")
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        _remove(path)
        return None, f"removed an unreadable state file {path} ({exc})"
    if _proc(state.get("daemon", {})) is not None:
        return state, None
    _kill_workers(state)
    _remove(path)
    pid = state.get("daemon", {}).get("pid")
    return None, f"removed a stale state file {path}: its cluster process {pid} is gone"


def _kill_workers(state: dict) -> None:
    for entry in (state.get("workers") or {}).values():
        p = _proc(entry)
        if p is not None:
            with contextlib.suppress(Exception):
                p.kill()


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _write_state(state: dict) -> None:
    path = state_path()
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked():
    """One ``up``/``down`` at a time per state folder."""
    import fcntl
    try:
        os.makedirs(state_dir(), mode=0o700, exist_ok=True)
        f = open(os.path.join(state_dir(), "cluster.lock"), "w")
    except OSError as exc:
        raise Failure(f"cannot use the state folder {state_dir()}: {exc.strerror or exc} "
                      f"(set {STATE_ENV} to another folder)") from exc
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def cluster_for(need: dict | None) -> dict | None:
    """For ``tensorvm run``: the state of the ``tensorvm up`` cluster when it is up and fits a
    job that asks for the tasks ``need`` (None: no ``--cluster``), else None (a warning line
    says why a cluster that is up was not used)."""
    if not os.path.exists(state_path()):  # the common case costs one stat
        return None
    state, note = read_state()
    if note:
        logger.warning("tensorvm: %s", note)
    if state is None:
        return None
    if not fits(state["spec"], need):
        logger.warning("tensorvm: the tensorvm up cluster (%s) has too few tasks for --cluster "
                       "%s: starting a LocalCluster for this job", spec_text(state["spec"]),
                       spec_text(need))
        return None
    return state


class Failure(click.ClickException):
    """Ends the command with ``code`` after one line (``tensorvm: message``)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.exit_code = code


def fresh_state(client) -> bool:
    """Clear the variables, queues and readers that earlier jobs left on the workers of the
    ``tensorvm up`` cluster (as :meth:`tv.Session.reset` does), so that a job run on it starts
    from a clean cluster, as on a LocalCluster of its own (a rerun of ``logreg`` would else
    find its trained weights, or refuse a variable of another shape) — unless another client
    is using the cluster now (two jobs at once keep their state). True when cleared."""
    from tensorvm.runtime.dask_plane import _clear_resources
    try:
        others = client.run_on_scheduler(_other_clients, client.id)
        if others:
            logger.info("tensorvm: %d other client(s) on the cluster: its state is kept",
                        len(others))
            return False
        client.run(_clear_resources, None)
        return True
    except Exception as exc:  # noqa: BLE001 - never fail a job over the clean-up
        logger.debug("tensorvm: could not clear the cluster's state: %r", exc)
        return False


def _other_clients(me: str, dask_scheduler=None) -> list[str]:
    return [c for c in dask_scheduler.clients if c not in (me, "fire-and-forget")]


def page_link(state: dict) -> str:
    return f"{state['dashboard']}/tensorvm"


# ---- the commands --------------------------------------------------------------------------
@click.command()
@click.option("--cluster", "spec", metavar="SPEC", default=spec_text(DEFAULT_SPEC),
              show_default=True, help="Its tasks, one worker process each: JOB=N,...")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Threads per worker process [default: the cores shared out, one each when "
                   "the processes fill them].")
@click.option("--timeout", type=click.FloatRange(min=1), default=120.0, show_default=True,
              help="Seconds to wait for the cluster to start.")
def up(spec, threads, timeout):
    """Start a local cluster that stays up; tensorvm run uses it, tensorvm down stops it."""
    from .runner import parse_cluster
    try:
        want = parse_cluster(spec)
    except ValueError as exc:
        raise Failure(str(exc), 2) from exc
    with _locked():
        state, note = read_state()
        if note:
            click.echo(f"tensorvm: {note}", err=True)
        if state is not None:
            same = state["spec"] == want and threads in (None, state.get("threads"))
            click.echo(f"tensorvm: already up at {state['address']} ({spec_text(state['spec'])}"
                       f", {state['threads']} thread(s) each), dashboard {page_link(state)}"
                       + ("" if same else "; tensorvm down first to change it"), err=True)
            sys.exit(0 if same else 1)
        state = _start_daemon(want, threads, timeout)
    click.echo(f"tensorvm: cluster up at {state['address']} ({spec_text(want)}, "
               f"{state['threads']} thread(s) each); tensorvm down stops it")
    click.echo(f"dashboard: {page_link(state)}")


def _start_daemon(spec: dict, threads: int | None, timeout: float) -> dict:
    import select
    log = os.path.join(state_dir(), "cluster.log")
    cmd = [sys.executable, "-m", "tensorvm.jobs.local_up", "--spec", spec_text(spec),
           "--state", state_path()] + (["--threads", str(threads)] if threads else [])
    with open(log, "wb") as logf:  # this cluster's log only
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=logf, start_new_session=True, close_fds=True)
    deadline = time.monotonic() + timeout
    line = b""
    try:
        while time.monotonic() < deadline:  # the daemon prints one line when it is up
            left = max(0.0, deadline - time.monotonic())
            if select.select([proc.stdout], [], [], left)[0]:
                line = proc.stdout.readline()
                break
    except BaseException:  # Ctrl-C while it starts: no cluster left behind
        _stop_group(proc.pid, 10.0)
        raise
    proc.stdout.close()
    if line.startswith(b"{"):
        return json.loads(line)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5 if line == b"" and time.monotonic() < deadline else 0.1)
    late = proc.poll() is None
    if late:  # never came up in time: stop it and what it started
        _stop_group(proc.pid, 10.0)
    raise Failure(f"the cluster did not start{f' in {timeout:g} s' if late else ''}: "
                  f"{_last_line(log)} (log: {log})")


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines()]
        return next((ln for ln in reversed(lines) if ln), "no output")
    except OSError:
        return "no log"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the state as one JSON document.")
def status(as_json):
    """Say whether the local cluster is up: its address, workers and dashboard."""
    state, note = read_state()
    if note:
        click.echo(f"tensorvm: {note}", err=True)
    if as_json:
        click.echo(json.dumps(state or {"up": False}))
        sys.exit(0 if state else 3)
    if state is None:
        click.echo("tensorvm: no local cluster is up (tensorvm up starts one)")
        sys.exit(3)  # as systemctl status / service status: 3 = not running
    live, why = _live_workers(state)
    up_s = time.time() - state.get("daemon", {}).get("created", time.time())
    click.echo(f"up        {state['address']}  ({spec_text(state['spec'])}, "
               f"{state['threads']} thread(s) each, up {_duration(up_s)}, pid "
               f"{state['daemon']['pid']})")
    click.echo(f"workers   {_workers_line(state, live, why)}")
    click.echo(f"dashboard {page_link(state)}")


def _live_workers(state: dict, timeout: float = 5.0) -> tuple[dict | None, str | None]:
    """The workers the scheduler knows now, by name (its dashboard's ``identity.json``: no
    Dask client to start), or ``(None, why)``."""
    import urllib.request
    try:
        with urllib.request.urlopen(f"{state['dashboard']}/json/identity.json",
                                    timeout=timeout) as resp:
            workers = json.load(resp).get("workers", {})
        return {str(w.get("name")): w for w in workers.values()}, None
    except (OSError, ValueError) as exc:
        return None, str(getattr(exc, "reason", None) or exc)


def _workers_line(state: dict, live: dict | None, why: str | None) -> str:
    names = list(state["workers"])
    if live is None:
        return f"{', '.join(names)} (the scheduler does not answer: {why})"
    parts = []
    for name in names:
        if name not in live:
            parts.append(f"{name} MISSING")
            continue
        pid = state["workers"][name]["pid"]
        restarted = _proc(state["workers"][name]) is None  # its Nanny started a new one
        parts.append(f"{name} ({'restarted' if restarted else f'pid {pid}'})")
    running = sum(n in live for n in names)
    return f"{', '.join(parts)}: {running}/{len(names)} running"


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


@click.command()
@click.option("--timeout", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds to wait for a clean stop before killing the processes.")
def down(timeout):
    """Stop the local cluster started by tensorvm up and remove its state file."""
    with _locked():
        state, note = read_state()
        if note:
            click.echo(f"tensorvm: {note}", err=True)
        if state is None:
            if not note:
                click.echo("tensorvm: no local cluster is up")
            return
        clean = _stop_group(int(state["daemon"]["pid"]), timeout, state["daemon"])
        _kill_workers(state)
        _remove(state_path())
    click.echo(f"tensorvm: stopped the cluster at {state['address']}"
               + ("" if clean else f" (killed: no clean stop in {timeout:g} s)"))


def _stop_group(pid: int, timeout: float, entry: dict | None = None) -> bool:
    """SIGTERM the daemon, wait ``timeout`` s for it to exit, else SIGKILL its process group
    (the daemon leads its own session: its worker processes are in its group). True when it
    stopped cleanly."""
    import psutil
    try:
        p = _proc(entry) if entry else psutil.Process(pid)
        if p is None:
            return True
        p.terminate()
        p.wait(timeout)
        return True
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(psutil.Error):
        p.wait(5)
    return False


# ---- the daemon ----------------------------------------------------------------------------
def serve(spec: dict, threads: int | None, path: str) -> int:
    """The daemon's body: start the cluster, write the state file, say so on stdout (one JSON
    line, read by ``up``), wait for SIGTERM/SIGINT/SIGHUP, close the cluster, remove the
    state file."""
    import threading

    from distributed import Client

    from tensorvm.runtime.cluster.spec import ClusterSpec
    from tensorvm.runtime.cluster.local import start_local_cluster, worker_layout, worker_threads
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    cspec = ClusterSpec(spec)
    nthreads = worker_threads(len(worker_layout(cspec)), threads)
    # stdout is the pipe to `up`, which leaves once it has read the ready line: the worker
    # processes (which inherit fd 1) and this one print to the log from now on
    ready = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    cluster = start_local_cluster(cspec, threads=nthreads)
    try:
        with Client(cluster, set_as_default=False) as client:
            pids = client.run(os.getpid)
            info = client.scheduler_info()
            client.run(_warm)  # the first job finds its workers warm
        workers = {str(info["workers"][a]["name"]): {**_proc_entry(pid), "address": a}
                   for a, pid in sorted(pids.items())}
        dashboard = cluster.dashboard_link.rsplit("/status", 1)[0]
        state = {"version": 1, "address": cluster.scheduler_address, "dashboard": dashboard,
                 "spec": spec, "threads": nthreads, "daemon": _proc_entry(os.getpid()),
                 "workers": dict(sorted(workers.items())), "cwd": os.getcwd(),
                 "log": os.path.join(os.path.dirname(path), "cluster.log")}
        _write_state(state)
        ready.write(json.dumps(state) + "\n")
        ready.close()
        logger.warning("tensorvm up: cluster at %s, dashboard %s", state["address"], dashboard)
        logging.getLogger("distributed").setLevel(logging.WARNING)  # not a line per client
        while not stop.wait(3600):
            pass
    finally:
        cluster.close(timeout=20)
        with contextlib.suppress(Exception):
            with open(path, encoding="utf-8") as f:
                mine = json.load(f).get("daemon", {}).get("pid") == os.getpid()
            if mine:
                _remove(path)
    return 0


WARM_MODULES = ("tensorvm.runtime.dask_plane", "tensorvm.mapreduce", "threadpoolctl",
                "distributed.protocol.numpy", "distributed.protocol.arrow", "pyarrow.dataset",
                "fsspec.implementations.local", "numpy.ma")


def _warm() -> None:
    """On each worker of the cluster being started: import what every job's tasks import on
    first use (measured: 0.2-0.5 s of the first job's time on a 2-core machine)."""
    import importlib
    for name in WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _main(argv=None) -> int:
    import argparse

    from .runner import parse_cluster
    ap = argparse.ArgumentParser(prog="python -m tensorvm.jobs.local_up",
                                 description="the tensorvm up daemon (started by tensorvm up)")
    ap.add_argument("--spec", default=spec_text(DEFAULT_SPEC))
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--state", default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if args.state:
        os.environ[STATE_ENV] = os.path.dirname(args.state)
    return serve(parse_cluster(args.spec), args.threads, args.state or state_path())


if __name__ == "__main__":
    raise SystemExit(_main())
