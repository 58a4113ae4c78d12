"""Map-reduce on a cluster started by hand, disturbed the way an operator's cluster is: a
worker killed (``kill -9``) mid-job and restarted by name, a worker joining mid-job, a worker
stopped for a while (SIGSTOP, then SIGCONT), a job that fails (issue 23).

Failures first: these describe floating map and reduce tasks (a stateless task placed on
``/job:worker`` runs on any worker of the job: Dask places it, steals it from a slow worker,
gives it to a worker that joins, and recomputes only the lost keys), one map task per input
split. Each map call is recorded by the map function itself (the worker's name, its process
id and a digest of its split's records, one line in ``maps.log``), so the tests count map
tasks per worker without reading scheduler internals, and synchronise on those records and
on barrier files, never on sleeps.

Assumed of the build: ``Job.run`` on a session joined by address (no ClusterSpec) runs one
map task per split of the input (splits here are whole ``split_size`` blocks, so no grouping
of small files applies), the map function's ``tv.py_func(..., stateful=False)`` floats with
the rest of the map task, and ``Result.attempts`` stays 1 when the job recovers a lost
worker's tasks in place.
"""
from __future__ import annotations

import collections
import signal
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest
from hand_cluster import hand_cluster, restore  # noqa: F401  (hand_cluster: a fixture)

import tensorvm as tv
import tensorvm.mapreduce as mr

pytestmark = pytest.mark.cluster

SPLIT = 4096  # bytes; every input file is a whole number of splits


# ---- input and the recording map -------------------------------------------------------------
def _corpus(folder: Path, n_files: int, splits_per_file: int) -> tuple[str, collections.Counter]:
    """Text files of exactly ``splits_per_file`` x :data:`SPLIT` bytes each (the last line
    padded with spaces), and their word counts."""
    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(300)]
    expected: collections.Counter = collections.Counter()
    folder.mkdir()
    for f in range(n_files):
        size = splits_per_file * SPLIT
        lines, used = [], 0
        while True:
            line = " ".join(vocab[i] for i in rng.integers(0, len(vocab), rng.integers(3, 12)))
            if used + len(line) + 1 > size - 64:
                break
            lines.append(line)
            used += len(line) + 1
        text = "\n".join(lines) + "\n"
        text += " " * (size - len(text) - 1) + "\n"
        assert len(text) == size
        (folder / f"in-{f}.txt").write_text(text)
        expected.update(w for line in lines for w in line.split())
    return f"{folder.as_uri()}/*.txt", expected


def _recording(folder: Path, hold=None):
    """The map's Python step: ``hold(worker name, folder)`` (a barrier a test controls), then
    one line ``name<TAB>pid<TAB>digest of the records`` appended to ``folder/maps.log``."""
    log = str(folder / "maps.log")

    def fn(lines):
        import hashlib
        import os

        from distributed import get_worker
        name = str(get_worker().name)
        if hold is not None:
            hold(name, folder)
        digest = hashlib.md5(repr(list(lines)).encode()).hexdigest()
        with open(log, "a") as f:
            f.write(f"{name}\t{os.getpid()}\t{digest}\n")
        return lines
    return fn


def _maps(folder: Path) -> list[tuple[str, str, str]]:
    """The map calls recorded so far: ``(worker name, pid, digest)``."""
    path = folder / "maps.log"
    if not path.exists():
        return []
    return [tuple(line.split("\t")) for line in path.read_text().splitlines() if line]


def _per_worker(folder: Path) -> collections.Counter:
    return collections.Counter(name for name, _, _ in _maps(folder))


def _job(src: str, folder: Path, hold=None, **kw) -> mr.Job:
    fn = _recording(folder, hold)
    kw.setdefault("num_reducers", 2)
    return mr.Job(mr.text(src, split_size=SPLIT),
                  lambda lines: mr.emit(tv.strings.split(
                      tv.py_func(fn, [lines], tv.string, stateful=False)), 1),
                  combine="sum", reduce="sum", name="floating", **kw)


def _in_thread(fn) -> Future:
    fut: Future = Future()

    def body():
        try:
            fut.set_result(fn())
        except BaseException as e:  # handed to the test through the future
            fut.set_exception(e)
    threading.Thread(target=body, daemon=True).start()
    return fut


def _wait(cond, timeout: float) -> bool:
    """Poll ``cond()`` until true or ``timeout`` seconds pass; whether it came true."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _session(hc):
    return tv.Session(hc.address, graph=tv.Graph(), verbose=False)


@pytest.fixture
def cluster(hand_cluster):  # noqa: F811
    """The module's hand-started cluster with both workers back (running, not stopped) after
    the test. Its scheduler moves no task off a straggler: these tests hold a worker in a map
    call on purpose, and Dask's own placement is what they test (moves:
    test_straggler_moves.py)."""
    def moves_off(dask_scheduler):  # (nested: travels by value, not by module name)
        from tensorvm.runtime.cluster.stragglers import StragglerMoves
        for plugin in dask_scheduler.plugins.values():
            if isinstance(plugin, StragglerMoves):
                plugin.factor = float("inf")

    with _session(hand_cluster):  # (a session installs tensorvm's scheduler plugins)
        hand_cluster.client.run_on_scheduler(moves_off)
    yield hand_cluster
    restore(hand_cluster)


# ---- d: one map task per split ---------------------------------------------------------------
def test_one_map_task_per_split(cluster, tmp_path):
    src, expected = _corpus(tmp_path / "in", n_files=3, splits_per_file=4)
    job = _job(src, tmp_path)
    n_splits = len(job.input.splits())
    assert n_splits == 12
    with _session(cluster) as s:
        res = job.run(s)
    assert res.to_dict() == dict(expected)
    assert res.num_map_tasks == n_splits, "one map task per split, not one per worker"
    assert len(_maps(tmp_path)) == n_splits


# ---- e: a failed job leaves nothing behind ---------------------------------------------------
def _poisoned():
    """A map step that fails on a record holding ``poison`` (a closure: the workers cannot
    import this module, so it travels by value)."""
    def fn(lines):
        import numpy as np
        if any(b"poison" in (x if isinstance(x, bytes) else x.encode()) for x in lines):
            raise ValueError("a record the map cannot take")
        return np.asarray(lines)
    return fn


@pytest.mark.parametrize("shuffle", ["memory", "storage"])
def test_failed_job_leaves_no_scratch_or_temporary(cluster, tmp_path, shuffle):
    src, _ = _corpus(tmp_path / "in", n_files=2, splits_per_file=3)
    with open(tmp_path / "in" / "in-1.txt", "r+") as f:
        f.seek(SPLIT + 100)
        f.write("\npoison\n")
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    job = mr.Job(mr.text(src, split_size=SPLIT),
                 lambda lines: mr.emit(tv.strings.split(
                     tv.py_func(_poisoned(), [lines], tv.string, stateful=False)), 1),
                 combine="sum", reduce="sum", num_reducers=2, name="poisoned",
                 output=mr.text_output(out.as_uri()), scratch=scratch.as_uri(),
                 spill_bytes=0, shuffle=shuffle)
    with _session(cluster) as s, pytest.raises(tv.errors.OpError, match="cannot take"):
        job.run(s)
    left = [f for d in (out, scratch) if d.exists() for f in d.rglob("*") if f.is_file()]
    assert left == [], f"a failed job left {left}"
    assert not (out / "_temporary").exists() and not (out / "_SUCCESS").exists()


# ---- c: a stopped worker does not hold the job -----------------------------------------------
def _stalled_then_slow():
    """A hold for :func:`_recording`: worker-1's first map call marks ``started-worker-1`` and
    waits for ``stopped`` (the test writes it once the worker is stopped, so the worker
    finishes no map task before); every call then lasts a little (a queue to steal from)."""
    def hold(name, folder):
        import time
        if name == "worker-1" and not (folder / "stopped").exists():
            (folder / "started-worker-1").touch()
            deadline = time.monotonic() + 60
            while not (folder / "stopped").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        time.sleep(0.05)
    return hold


@pytest.mark.timeout(120)
def test_stopped_worker_does_not_hold_the_job(cluster, tmp_path):
    src, expected = _corpus(tmp_path / "in", n_files=4, splits_per_file=4)
    n_splits = 16
    job = _job(src, tmp_path, _stalled_then_slow())
    with _session(cluster) as s:
        fut = _in_thread(lambda: job.run(s))
        try:
            assert _wait(lambda: (tmp_path / "started-worker-1").exists() or fut.done(), 60)
            cluster.signal("worker-1", signal.SIGSTOP)
            # stopped until the other worker has done nearly all (or a deadline passes)
            _wait(lambda: _per_worker(tmp_path)["worker-0"] >= n_splits - 2 or fut.done(), 10)
        finally:
            (tmp_path / "stopped").touch()
            cluster.signal("worker-1", signal.SIGCONT)
        res = fut.result(timeout=60)
    assert res.to_dict() == dict(expected)
    done = _per_worker(tmp_path)
    assert done["worker-0"] >= 0.75 * n_splits, \
        f"the stopped worker held its map tasks: map tasks per worker {dict(done)}"


# ---- b: a worker that joins mid-job takes map tasks ------------------------------------------
def _held_after(who: str, n: int):
    """A hold for :func:`_recording`: worker ``who``'s map calls after its first ``n`` wait (up
    to a minute) for the file ``release``, after marking ``started-<who>``; every other call
    goes on."""
    def hold(name, folder):
        import time
        if name != who or (folder / "release").exists():
            return
        log = folder / "maps.log"
        done = sum(1 for line in (log.read_text().splitlines() if log.exists() else [])
                   if line.split("\t")[0] == who) if n else 0
        if done < n:
            return
        (folder / f"started-{who}").touch()
        deadline = time.monotonic() + 60
        while not (folder / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return hold


def _held(who: str):
    """:func:`_held_after` from worker ``who``'s first map call."""
    return _held_after(who, 0)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shuffle", ["memory", "storage"])
def test_worker_joining_mid_job_runs_map_tasks(cluster, tmp_path, shuffle):
    """``storage``: before, the phased job's map steps were pinned to the workers there at its
    start (``/job:worker/task:<i>``): the worker that joined got none."""
    src, expected = _corpus(tmp_path / "in", n_files=2, splits_per_file=4)
    job = _job(src, tmp_path, _held("worker-0"), shuffle=shuffle,
               scratch=(tmp_path / "scratch").as_uri())
    cluster.stop_worker("worker-1")
    try:
        with _session(cluster) as s:  # a job started on one worker
            fut = _in_thread(lambda: job.run(s))
            assert _wait(lambda: (tmp_path / "started-worker-0").exists() or fut.done(), 60)
            cluster.start_worker("worker-1")
            cluster.wait_for(("worker-1",))
            # worker-0 is held in its first map task until the newcomer has done one
            _wait(lambda: _per_worker(tmp_path)["worker-1"] >= 1 or fut.done(), 10)
            (tmp_path / "release").touch()
            res = fut.result(timeout=60)
    finally:
        (tmp_path / "release").touch()
    assert res.to_dict() == dict(expected)
    done = _per_worker(tmp_path)
    assert done["worker-1"] >= 1, f"the worker that joined ran no map task: {dict(done)}"


# ---- a: a worker killed mid-job; only its tasks run again ------------------------------------
@pytest.mark.timeout(180)
@pytest.mark.parametrize("shuffle", ["memory", "storage"])
def test_killed_worker_reruns_only_its_tasks(cluster, tmp_path, caplog, shuffle):
    """``storage``: the phased path (a step per map task, the shuffle through storage), whose
    driver named no re-run task before (``Result.rerun`` empty, no log line)."""
    src, expected = _corpus(tmp_path / "in", n_files=3, splits_per_file=4)
    out = tmp_path / "out"
    # worker-1 is held in its first map task (until it is killed); worker-0 maps on
    job = _job(src, tmp_path, _held("worker-1"), output=mr.text_output(out.as_uri()),
               shuffle=shuffle)
    with _session(cluster) as s:
        fut = _in_thread(lambda: job.run(s))
        assert _wait(lambda: (tmp_path / "started-worker-1").exists() or fut.done(), 60)
        cluster.kill("worker-1")  # kill -9, mid-map, before any of its output
        (tmp_path / "release").touch()
        cluster.start_worker("worker-1")  # restarted by name
        res = fut.result(timeout=120)
    got: collections.Counter = collections.Counter()
    for p in sorted(out.glob("part-r-*")):
        for line in p.read_text().splitlines():
            k, v = line.split("\t")
            assert k not in got
            got[k] = int(v)
    assert got == expected  # nothing lost, nothing doubled
    assert (out / "_SUCCESS").exists()
    # ... and the job was not run again whole: one attempt, no split mapped twice by the
    # worker that survived (it keeps its finished map outputs)
    whole = [r.getMessage() for r in caplog.records if "running it again" in r.getMessage()]
    assert not whole and res.attempts == 1, \
        f"the whole job ran {res.attempts} times: {whole}"
    survivor = collections.Counter(d for name, _, d in _maps(tmp_path) if name == "worker-0")
    assert max(survivor.values()) == 1, "the surviving worker redid its finished map tasks"
    # the driver names what ran again: the one map task worker-1 was running, nothing else
    assert len(res.rerun) == 1 and res.rerun[0].startswith("map"), res.rerun
    said = [r.getMessage() for r in caplog.records if "ran again" in r.getMessage()]
    assert len(said) == 1 and f"{res.rerun[0]} ran again" in said[0], said


@pytest.mark.timeout(180)
def test_killed_worker_finished_map_tasks_are_read_back(cluster, tmp_path):
    """A worker killed after finishing map tasks: their outputs were kept on the job's storage
    (Hadoop's and Spark's map outputs on disk), so no split is mapped twice; only the task it
    was running runs again, and nothing of the kept outputs is left after the commit."""
    src, expected = _corpus(tmp_path / "in", n_files=3, splits_per_file=4)
    out = tmp_path / "out"
    # worker-1 maps two splits, then is held in its third (until it is killed)
    job = _job(src, tmp_path, _held_after("worker-1", 2), output=mr.text_output(out.as_uri()))
    with _session(cluster) as s:
        fut = _in_thread(lambda: job.run(s))
        assert _wait(lambda: (tmp_path / "started-worker-1").exists() or fut.done(), 60)
        finished = [d for name, _, d in _maps(tmp_path) if name == "worker-1"]
        cluster.kill("worker-1")  # kill -9, holding two finished map outputs
        (tmp_path / "release").touch()
        cluster.start_worker("worker-1")
        res = fut.result(timeout=120)
    got = {}
    for p in sorted(out.glob("part-r-*")):
        for line in p.read_text().splitlines():
            k, v = line.split("\t")
            got[k] = int(v)
    assert got == dict(expected) and res.attempts == 1
    assert len(finished) == 2
    mapped = collections.Counter(d for _, _, d in _maps(tmp_path))
    assert len(mapped) == 12
    again = {d: c for d, c in mapped.items() if c > 1}
    assert not again, f"{len(again)} split(s) mapped again after the kill (of worker-1's " \
                      f"{len(finished)} finished)"
    assert not (out / "_temporary").exists()
