"""Issue 24, items 9 and 15: map-reduce outputs have one owner, and the CLI refuses impossible
numbers as usage errors.

* Two ``mr.Job``s writing one output at once (threads of one process, and two ``tensorvm``
  processes): exactly one owns the output (claimed atomically by ``setup_job``); the other
  fails at once with ``tv.errors.AlreadyExistsError`` naming the URL and touches nothing; the
  folder then holds exactly the winner's files, ``_SUCCESS`` and no ``_temporary``.
* ``tensorvm run JOB --num-reducers 0`` (``--split-size 0``, a negative count, a zero size...)
  exits 2 with one line naming the option, before any cluster starts.
"""
from __future__ import annotations

import collections
import os
import subprocess
import sys
import textwrap
import threading
import uuid

import fsspec
import pytest

import tensorvm as tv
import tensorvm.mapreduce as mr
from test_cli import one_line_error

BIN = os.path.dirname(sys.executable)
TVM = f"{BIN}/tensorvm"
TRIALS = 10
GATE_S = 120  # only a safety net: the gate opens as soon as both jobs are past setup_job

INPUTS = {"a": "alpha beta alpha\nbeta alpha\n", "b": "gamma delta\ngamma gamma\n"}


def _expected(name: str) -> dict:
    return {k: str(v) for k, v in collections.Counter(INPUTS[name].split()).items()}


def _read_output(fs, path: str) -> dict:
    out = {}
    for p in sorted(fs.glob(f"{path}/part-r-*")):
        for line in fs.cat(p).decode().splitlines():
            k, v = line.split("\t")
            assert k not in out
            out[k] = v
    return out


def _race_once(in_urls: dict, out_url: str) -> dict:
    """Run the two jobs in threads, released together; each job's map waits until the other
    job has either failed or reached its own map (so both really overlap). Returns
    ``{name: Result or exception}``."""
    cond = threading.Condition()
    mapped, failed = set(), []

    def gate(name):
        def fn(lines):
            with cond:
                mapped.add(name)
                cond.notify_all()
                cond.wait_for(lambda: len(mapped) == 2 or failed, timeout=GATE_S)
            return lines
        return fn

    start = threading.Barrier(2)
    outcome: dict = {}

    def run(name):
        job = mr.Job(mr.text(in_urls[name]),
                     lambda lines, f=gate(name): mr.emit(
                         tv.strings.split(tv.py_func(f, [lines], tv.string)), 1),
                     combine="sum", reduce="sum", num_reducers=2,
                     output=mr.text_output(out_url), name=f"race_{name}")
        start.wait()
        try:
            outcome[name] = job.run()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            outcome[name] = e
            with cond:
                failed.append(name)
                cond.notify_all()

    threads = [threading.Thread(target=run, args=(n,)) for n in INPUTS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcome


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_two_jobs_racing_for_one_output_one_owns_it_the_other_is_refused(kind, tmp_path):
    """Before: 1-5 of 10 trials went wrong (AbortedError 'lost its commit', raw OSError
    'Directory not empty: .../_temporary', both failing beside a committed _SUCCESS,
    _temporary debris in a committed output)."""
    mem = fsspec.filesystem("memory")
    root = f"/tvm-race-{uuid.uuid4().hex[:8]}"
    if kind == "file":
        fs, base, url_base = fsspec.filesystem("file"), str(tmp_path), tmp_path.as_uri()
    else:
        fs, base, url_base = mem, root, f"memory://{root}"
    for name, text in INPUTS.items():
        fs.pipe(f"{base}/in-{name}.txt", text.encode())
    in_urls = {n: f"{url_base}/in-{n}.txt" for n in INPUTS}
    problems = []
    try:
        for trial in range(TRIALS):
            out_url, out_path = f"{url_base}/out-{trial}", f"{base}/out-{trial}"
            outcome = _race_once(in_urls, out_url)
            won = [n for n, r in outcome.items() if isinstance(r, mr.Result)]
            lost = [n for n, r in outcome.items() if not isinstance(r, mr.Result)]
            if len(won) != 1:
                problems.append((trial, {n: repr(r) for n, r in outcome.items()}))
                continue
            err = outcome[lost[0]]
            if not isinstance(err, tv.errors.AlreadyExistsError) or out_url not in str(err) \
                    or "another job" not in str(err):
                problems.append((trial, repr(err)))
                continue
            fs.invalidate_cache(out_path)
            names = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(out_path, detail=False))
            if names != ["_SUCCESS", "part-r-00000", "part-r-00001"]:
                problems.append((trial, names))
                continue
            if _read_output(fs, out_path) != _expected(won[0]):
                problems.append((trial, "not the winner's output", won))
    finally:
        if kind == "memory":
            mem.rm(root, recursive=True)
    assert problems == [], problems


def test_a_loser_never_touches_the_owners_output_and_the_owner_still_commits(tmp_path):
    """The refused job fails in setup_job, before any step: the owner's attempt files, claims
    and commit are untouched, and the owner's retry (a second setup_job) keeps its claim."""
    out = (tmp_path / "out").as_uri()
    owner = tv.storage.OutputCommitter(out)
    owner.setup_job()
    tv.storage.write_output(owner, 0, "x", ["kept"], format="text")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for overwrite in (False, True):  # another job: another thread (a thread that sets an
        got = []                       # output up again has abandoned its earlier job there)
        t = threading.Thread(target=lambda: got.append(_rival(out, overwrite)))
        t.start()
        t.join()
        assert isinstance(got[0], tv.errors.AlreadyExistsError), got
        assert out in str(got[0]) and "another job" in str(got[0]), got
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    owner.setup_job()  # a retry of the owner's step: still its output, debris cleared
    tv.storage.write_output(owner, 0, "y", ["mine"], format="text")
    assert owner.commit_task(0, "y")
    owner.commit_job()
    assert sorted(os.listdir(tmp_path / "out")) == ["_SUCCESS", "part-00000.txt"]
    # released: the next job may claim it (and is refused only as an existing output)
    with pytest.raises(FileExistsError, match="already exists"):
        tv.storage.OutputCommitter(out).setup_job()


def _rival(out: str, overwrite: bool):
    """Another job's set-up, cleaning up as a driver does when it fails (abort_job)."""
    rival = tv.storage.OutputCommitter(out)
    try:
        rival.setup_job(overwrite=overwrite)
    except Exception as e:  # noqa: BLE001 - returned to the test
        rival.abort_job()  # must not delete the owner's attempts
        return e
    return None


def test_an_aborted_job_releases_its_output(tmp_path):
    out = (tmp_path / "out").as_uri()
    first = tv.storage.OutputCommitter(out)
    first.setup_job()
    first.abort_job()
    second = tv.storage.OutputCommitter(out)
    second.setup_job()
    assert second.commit_job() == []
    assert sorted(os.listdir(tmp_path / "out")) == ["_SUCCESS"]


# ---- the command line -------------------------------------------------------------------------
BAD_NUMBERS = [
    ("wordcount", ["--num-reducers", "0"], "--num-reducers"),
    ("wordcount", ["--split-size", "0"], "--split-size"),
    ("grep", ["--pattern", "x", "--num-reducers", "-1"], "--num-reducers"),
    ("terasort", ["--output", "OUT", "--sample", "0"], "--sample"),
    ("kmeans", ["--k", "0"], "--k"),
    ("pagerank", ["--damping", "1.5"], "--damping"),
    ("ridge", ["--steps", "0"], "--steps"),
    ("ridge-ps", ["--workers", "0"], "--workers"),
    ("logreg", ["--batch-size", "0"], "--batch-size"),
    ("embedding", ["--lr", "-0.1"], "--lr"),
    ("teragen", ["--url", "OUT", "--n-records", "-5"], "--n-records"),
]


@pytest.mark.parametrize("job,args,flag", BAD_NUMBERS, ids=[f"{j}{a[-2]}{a[-1]}"
                                                            for j, a, _ in BAD_NUMBERS])
def test_an_impossible_number_is_a_usage_error_before_any_cluster_starts(job, args, flag,
                                                                         tmp_path):
    """Before: --num-reducers 0 and --split-size 0 exited 1 'job failed' (after starting a
    cluster and running the job)."""
    (tmp_path / "in.txt").write_text("a b\n")
    needs_input = job not in ("ridge", "ridge-ps", "logreg", "embedding", "teragen")
    argv = [TVM, "run", job, *(["--input", str(tmp_path / "in.txt")] if needs_input else []),
            *[a.replace("OUT", str(tmp_path / "out")) for a in args]]  # no --in-process:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)  # none starts
    line = one_line_error(out, 2, flag)
    assert "dashboard" not in out.stderr and "failed" not in line, line
    assert not (tmp_path / "out").exists()


def test_a_valid_edge_value_is_still_accepted(tmp_path):
    (tmp_path / "in.txt").write_text("a b a\n")
    out = subprocess.run([TVM, "run", "wordcount", "--input", str(tmp_path / "in.txt"),
                          "--num-reducers", "1", "--split-size", "1", "--in-process",
                          "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"a": 2' in out.stdout


SLOW_JOB = '''
import os, time
import tensorvm as tv, tensorvm.mapreduce as mr

def hold(lines):
    def wait(x):
        print("holding", flush=True)
        while not os.path.exists(os.environ["TVM_GO"]):
            time.sleep(0.05)
        return x
    return mr.emit(tv.strings.split(tv.py_func(wait, [lines], tv.string)), 1)

@tv.job
def slowjob(input: str, output: str, session=None):
    return mr.Job(mr.text(input), hold, reduce="sum", num_reducers=1,
                  output=mr.text_output(output)).run(session)
'''


def test_two_cli_processes_racing_for_one_output_the_second_exits_2(tmp_path):
    """The owner holds the output mid-job; a second process writing the same output exits 2
    with one line saying another job owns it, and leaves the owner's output whole."""
    (tmp_path / "slow.py").write_text(textwrap.dedent(SLOW_JOB))
    (tmp_path / "a.txt").write_text("a a b\n")
    (tmp_path / "b.txt").write_text("z z z\n")
    out, go = tmp_path / "out", tmp_path / "go"
    env = {**os.environ, "TVM_GO": str(go)}

    def argv(src):
        return [TVM, "run", str(tmp_path / "slow.py"), "--input", str(tmp_path / src),
                "--output", out.as_uri(), "--in-process", "--quiet"]

    owner = subprocess.Popen(argv("a.txt"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    try:
        assert owner.stdout.readline().strip() == "holding"
        loser = subprocess.run(argv("b.txt"), capture_output=True, text=True, timeout=120,
                               env=env)
        line = one_line_error(loser, 2, out.as_uri(), "another job")
        assert "Traceback" not in line
        go.write_text("")
        _, err = owner.communicate(timeout=120)
    finally:
        if owner.poll() is None:
            owner.kill()
    assert owner.returncode == 0, err
    assert sorted(os.listdir(out)) == ["_SUCCESS", "part-r-00000"]
    assert sorted((out / "part-r-00000").read_text().splitlines()) == ["a\t2", "b\t1"]
