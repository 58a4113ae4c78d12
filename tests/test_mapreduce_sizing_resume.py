"""Issue 23, items 3 and 4: reducers sized to the data, the shuffle's scratch removed on every
exit path, and driver recovery (``--resume``).

* ``num_reducers=None`` (the default) picks the count from the input size and the workers'
  ``memory_limit`` (a LocalCluster of processes with ``memory_limit="1GB"``; the fraction of
  a thread's memory one reducer may take is made tiny, so a MB of input needs several).
* An explicit count whose reducers' share cannot fit is one ``logging`` warning naming the
  numbers, before the job runs.
* The shuffle through storage goes under ``scratch=`` (or the output's ``_temporary``, never the
  machine's temporary folder) and is gone after a success, after a failing map function and
  after a KeyboardInterrupt raised in the driver.
* A ``tensorvm run`` killed (SIGKILL) after some reducers wrote their output, rerun with
  ``--resume``: the exact output, and the reducers that had finished are not run again (a marker
  file per reduce invocation).
"""
from __future__ import annotations

import collections
import json
import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import dask
import pytest

import tensorvm as tv
import tensorvm.mapreduce as mr

TVM = f"{os.path.dirname(sys.executable)}/tensorvm"
HANG_S = 240  # only a safety net against a hang: the test waits for files, not for time
MEMORY_LIMIT = "1GB"  # (a worker process's own baseline is ~155 MB: 200 MB pauses it at once)
FRACTION = 0.0004  # of a 1 GB thread's usable 632 MB: 253 kB of input per reducer
WORDS = [f"w{i:04d}" for i in range(400)]


def _write_text(folder, files=4, lines=6000):
    folder.mkdir(parents=True, exist_ok=True)
    want = collections.Counter()
    for f in range(files):
        rows = [" ".join(WORDS[(f * 7 + i * 13 + j) % len(WORDS)] for j in range(8))
                for i in range(lines)]
        (folder / f"t{f}.txt").write_text("\n".join(rows) + "\n")
        want.update(w for r in rows for w in r.split())
    return want


def _read_counts(out):
    got = {}
    for p in sorted(out.iterdir()):
        if p.name.startswith("part-"):
            for line in p.read_text().splitlines():
                k, v = line.split("\t")
                got[k] = int(v)
    return got


def _wc(input_url, **kw):
    return mr.Job(mr.text(input_url), lambda lines: mr.emit(tv.strings.split(lines), 1),
                  combine="sum", reduce="sum", name="wc", **kw)


@pytest.fixture(scope="module")
def small_workers():
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      memory_limit=MEMORY_LIMIT, dashboard_address=None) as lc:
        with tv.Session(lc.scheduler_address, graph=tv.Graph(), verbose=False) as s:
            yield s


@pytest.mark.cluster
def test_reducers_sized_to_input_and_worker_memory(small_workers, tmp_path, caplog):
    """Before: num_reducers defaulted to 2 whatever the input and the workers' memory."""
    want = _write_text(tmp_path / "in")
    size = sum(p.stat().st_size for p in (tmp_path / "in").iterdir())
    # FRACTION of what one thread can use: 80 % of the limit (the pause), less 160 MiB
    budget = int(FRACTION * (0.8 * 1_000_000_000 - (160 << 20)))
    expected = max(2, math.ceil(size / budget))
    assert expected > 2
    out = tmp_path / "out"
    caplog.set_level(logging.INFO, logger="tensorvm")
    with dask.config.set({"tensorvm.mapreduce.reducer-memory-fraction": FRACTION}):
        res = _wc(f"{tmp_path.as_uri()}/in/*.txt",
                  output=mr.text_output(out.as_uri())).run(small_workers)
    assert res.num_reducers == expected and res.counters["reducers"] == expected
    assert len([p for p in out.iterdir() if p.name.startswith("part-")]) == expected
    assert _read_counts(out) == dict(want)
    assert any(f"{expected} reducers for" in r.getMessage() for r in caplog.records)
    assert not any(r.levelno >= logging.WARNING for r in caplog.records
                   if "reducer" in r.getMessage())


@pytest.mark.cluster
def test_an_explicit_count_that_cannot_fit_is_warned_about(small_workers, tmp_path, caplog):
    """Before: two reducers for any input, silently (3 GB TeraSort on 1 GiB workers: both
    workers restarted by the memory monitor)."""
    _write_text(tmp_path / "in", files=2, lines=6000)
    caplog.set_level(logging.INFO, logger="tensorvm")
    events = []
    with dask.config.set({"tensorvm.mapreduce.reducer-memory-fraction": FRACTION}), \
            mr.common.progress_to(events.append):
        res = _wc(f"{tmp_path.as_uri()}/in/*.txt", num_reducers=1).run(small_workers)
    assert res.num_reducers == 1
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and
              r.name == "tensorvm"]
    assert len(warned) == 1, [r.getMessage() for r in warned]
    text = warned[0].getMessage()
    assert "1 reducer(s)" in text and "MiB per reducer" in text and "953.7 MiB" in text
    assert "at least" in text
    start = next(i for i, r in enumerate(caplog.records) if r is warned[0])
    assert not any("maps x" in r.getMessage() for r in caplog.records[:start])  # before it ran
    assert events and events[0]["event"] == "start"


# ---- the shuffle's scratch: every exit path -----------------------------------------------
def _scratch_job(tmp_path, map_fn=None, **kw):
    (tmp_path / "in").mkdir(exist_ok=True)
    for f in range(3):  # (only the last file has "bad": a failing map fails on it alone)
        (tmp_path / "in" / f"{f}.txt").write_text(("a b a\nc a bad\n" if f == 2 else
                                                  "a b a\nc a\n") * 50)
    return mr.Job(mr.text(f"{tmp_path.as_uri()}/in/*.txt"),
                  map_fn or (lambda lines: mr.emit(tv.strings.split(lines), 1)),
                  combine="sum", reduce="sum", num_reducers=2, shuffle="storage",
                  name="scratchjob", **kw)


def _left(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() \
        else []


def test_scratch_removed_after_success(tmp_path):
    """Before: maps-<id>/_CLOSED was left in the scratch folder after every job."""
    scratch = tmp_path / "scratch"
    res = _scratch_job(tmp_path, scratch=scratch.as_uri()).run()
    assert res.to_dict() == {"a": 450, "b": 150, "c": 150, "bad": 50}
    assert _left(scratch) == []


def test_scratch_removed_after_a_failing_map(tmp_path):
    """Before: a failed job left its map outputs (cleanup only on success)."""
    def boom(lines):
        def f(x):
            if any(b"bad" in (v if isinstance(v, bytes) else v.encode()) for v in x):
                raise ValueError("a bad batch")
            return x
        return mr.emit(tv.strings.split(tv.py_func(f, [lines], tv.string)), 1)
    scratch = tmp_path / "scratch"
    job = _scratch_job(tmp_path, map_fn=boom, scratch=scratch.as_uri(), map_tasks=3)
    with pytest.raises(tv.errors.OpError, match="a bad batch"):
        job.run()
    assert _left(scratch) == []


def test_scratch_removed_after_ctrl_c_in_the_driver(tmp_path, monkeypatch):
    """Before: a KeyboardInterrupt left the map outputs (and the interrupted job's list held
    only the committers)."""
    from tensorvm.mapreduce.recovery import sweep_interrupted
    scratch = tmp_path / "scratch"
    job = _scratch_job(tmp_path, scratch=scratch.as_uri())

    def interrupted(*args, **kw):  # the driver, once every map output is written
        assert _left(scratch), "the map outputs should be in scratch by now"
        raise KeyboardInterrupt
    monkeypatch.setattr(job, "_build_reducer", interrupted)
    with pytest.raises(KeyboardInterrupt):
        job.run()
    assert _left(scratch) == []
    sweep_interrupted()
    assert _left(scratch) == []


def test_the_shuffle_goes_under_the_outputs_temporary_not_tmp(tmp_path, monkeypatch):
    """Before: with no scratch= the map outputs went to the machine's /tmp (maps-<id>), a
    folder other machines' workers cannot read, and stayed there."""
    fake_tmp = tmp_path / "machine-tmp"
    fake_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(fake_tmp))
    seen = []
    job = _scratch_job(tmp_path, output=mr.text_output((tmp_path / "out").as_uri()))
    real = job._build_reducer

    def spy(*args, **kw):
        seen.extend(_left(tmp_path / "out"))
        return real(*args, **kw)
    monkeypatch.setattr(job, "_build_reducer", spy)
    job.run()
    assert _read_counts(tmp_path / "out") == {"a": 450, "b": 150, "c": 150, "bad": 50}
    assert any(s.startswith("_temporary/maps-") for s in seen)
    assert _left(fake_tmp) == []
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "_SUCCESS", "part-r-00000", "part-r-00001"]


# ---- driver recovery ------------------------------------------------------------------------
HELD_JOB = '''
import json, os, time, uuid
import numpy as np
import tensorvm as tv, tensorvm.mapreduce as mr


def _held_sum(markers, gate):
    def run(keys, values):
        ks = [k.decode() if isinstance(k, bytes) else str(k) for k in keys]
        os.makedirs(markers, exist_ok=True)
        before = len(os.listdir(markers))
        with open(os.path.join(markers, uuid.uuid4().hex), "w") as f:
            json.dump(sorted(set(ks)), f)
        while before >= 2 and not os.path.exists(gate):  # the third reducer on: held
            time.sleep(0.02)
        out = {}
        for k, v in zip(ks, np.asarray(values).tolist()):
            out[k] = out.get(k, 0) + int(v)
        names = sorted(out)
        return np.array(names, dtype=object), np.array([out[n] for n in names], np.int64)
    return run


@tv.job
def held(input: str, output: str, markers: str, gate: str, session=None):
    """Word count whose reducers after the second wait for the gate file."""
    def reduce_fn(keys, values):
        k, v = tv.py_func(_held_sum(markers, gate), [keys, values], [tv.string, tv.int64],
                          stateful=False)
        return mr.emit(k, v)
    return mr.Job(mr.text(input), lambda lines: mr.emit(tv.strings.split(lines), 1),
                  combine="sum", reduce=reduce_fn, num_reducers=4, name="held",
                  output=mr.text_output(output)).run(session)
'''


def _done_reducers(out):
    folder = out / "_temporary" / "_mr"
    if not folder.exists():
        return set()
    return {int(p.name.split("-")[1][1:]) for p in folder.iterdir()
            if p.name.startswith("done-")}


def _markers(folder):
    return [set(json.loads(p.read_text())) for p in folder.iterdir()] if folder.exists() \
        else []


def _adoptable(out):
    """The reducers whose done marker and attempt folder are both there."""
    folder = out / "_temporary" / "_mr"
    found = set()
    for p in folder.iterdir() if folder.exists() else ():
        if p.name.startswith("done-"):
            _, r, attempt = p.name.split("-", 2)
            if (out / "_temporary" / f"attempt_{int(r[1:]):05d}_{attempt}").exists():
                found.add(int(r[1:]))
    return found


@pytest.mark.parametrize("how", ["kill -9", "ctrl-c"])
def test_resume_after_the_driver_died(tmp_path, how):
    """Before: there was no --resume; a rerun after kill -9 ran every reducer again (and the
    dead driver's reducers' finished output was thrown away as debris), and a Ctrl-C threw
    the finished reducers' output away at once."""
    (tmp_path / "held.py").write_text(textwrap.dedent(HELD_JOB))
    want = _write_text(tmp_path / "in", files=3, lines=300)
    out, gate = tmp_path / "out", tmp_path / "gate"
    argv = [TVM, "run", str(tmp_path / "held.py"), "--input", f"{tmp_path.as_uri()}/in/*.txt",
            "--output", out.as_uri(), "--gate", str(gate), "--in-process"]
    log = tmp_path / "first.log"
    with open(log, "wb") as err:
        first = subprocess.Popen(argv + ["--markers", str(tmp_path / "m1"), "--quiet"],
                                 stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + HANG_S
        while len(_done_reducers(out)) < 2 or len(_markers(tmp_path / "m1")) < 3:
            assert first.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "the first run never got to its held reducer"
            time.sleep(0.05)
    finally:
        first.send_signal(signal.SIGKILL if how == "kill -9" or first.poll() is not None
                          else signal.SIGINT)
    if how == "ctrl-c":  # the driver releases the output, then its held reducer may go on
        while (out / "_temporary" / "_job").exists() and first.poll() is None:
            assert time.monotonic() < deadline, "the interrupted driver kept its claim"
            time.sleep(0.05)
        gate.write_text("")
        assert first.wait(timeout=HANG_S) == 130, log.read_text()[-2000:]
        assert "--resume" in log.read_text()
    first.wait()
    done = _adoptable(out)
    assert 2 <= len(done) < 4 and not (out / "_SUCCESS").exists()
    gate.write_text("")
    second = subprocess.run(argv + ["--markers", str(tmp_path / "m2"), "--resume", "--json"],
                            capture_output=True, text=True, timeout=HANG_S)
    assert second.returncode == 0, second.stderr[-3000:]
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    assert _read_counts(out) == dict(want)
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS"] + [
        f"part-r-{r:05d}" for r in range(4)]
    assert summary["counters"]["reducers_recovered"] == len(done)
    assert summary["counters"]["reduce_output_records"] == len(want)
    ran_again = _markers(tmp_path / "m2")
    assert len(ran_again) == 4 - len(done)  # one reduce invocation per reducer not done
    for r in done:  # and none of them was a finished reducer's
        keys = {line.split("\t")[0] for line in (out / f"part-r-{r:05d}").read_text()
                .splitlines()}
        assert all(not (keys & seen) for seen in ran_again)


def test_without_resume_a_rerun_starts_over(tmp_path):
    """Without --resume a dead driver's leftovers are debris, as before (the job runs all its
    reducers)."""
    (tmp_path / "held.py").write_text(textwrap.dedent(HELD_JOB))
    want = _write_text(tmp_path / "in", files=1, lines=50)
    out, gate = tmp_path / "out", tmp_path / "gate"
    gate.write_text("")
    job = mr.Job(mr.text(f"{tmp_path.as_uri()}/in/*.txt"),
                 lambda lines: mr.emit(tv.strings.split(lines), 1), combine="sum",
                 reduce="sum", num_reducers=3, name="again",
                 output=mr.text_output(out.as_uri()))
    from tensorvm import storage
    c = storage.OutputCommitter(out.as_uri())  # a dead run: its plan and a done reducer
    c.setup_job()
    from tensorvm.mapreduce import recovery
    recovery.write_plan(c, recovery.fingerprint(job, job._splits()), 3, ())
    storage.write_output(c, 0, "dead", ["bogus\t1"], format="text", name="part-r-00000")
    (out / "_temporary" / "_mr" / "done-r00000-dead").write_text("[1, 8]")
    c._held = False  # (as if its process had died: the claim is debris)
    storage.output._HELD.pop(c.job_id, None)
    res = job.run()
    assert "reducers_recovered" not in res.counters
    assert _read_counts(out) == dict(want)
