"""``tensorvm up`` / ``status`` / ``down`` and ``make run``'s demo (issue 25), in real
subprocesses, each with its own state folder (``TENSORVM_STATE_DIR``): the user's own
``~/.local/state/tensorvm`` is never read or written.

One cluster is started for the module (``tensorvm up``); the tests that use it run in file
order and the last one stops it with ``tensorvm down``.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request

import psutil
import pytest

BIN = os.path.dirname(sys.executable)
TVM = os.path.join(BIN, "tensorvm")
HANG_GUARD_S = 600  # a hung command fails the test instead of the suite; not a timing bound


def _env(state: str) -> dict:
    return {**os.environ, "TENSORVM_STATE_DIR": str(state)}


def tvm(state, *args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([TVM, *args], env=_env(state), cwd=cwd, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=HANG_GUARD_S)


def _alive(entry: dict) -> bool:
    try:
        p = psutil.Process(entry["pid"])
        return abs(p.create_time() - entry["created"]) < 0.5 and \
            p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _pids(state: dict) -> list[dict]:
    return [state["daemon"], *state["workers"].values()]


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    """A cluster started with ``tensorvm up`` (1 PS + 2 workers): ``(state dir, state)``."""
    state_dir = tmp_path_factory.mktemp("tvm-state")
    r = tvm(state_dir, "up", "--cluster", "ps=1,worker=2")
    assert r.returncode == 0, r.stderr
    with open(state_dir / "cluster.json") as f:
        state = json.load(f)
    try:
        yield state_dir, state, r
    finally:
        tvm(state_dir, "down")
        for entry in _pids(state):  # whatever a failed down left
            if _alive(entry):
                psutil.Process(entry["pid"]).kill()


def test_up_prints_the_address_and_the_dashboard_once(up):
    state_dir, state, r = up
    assert state["address"].startswith("tcp://127.0.0.1:")
    assert sorted(state["workers"]) == ["ps-0", "worker-0", "worker-1"]
    assert all(_alive(e) for e in _pids(state))
    assert r.stdout.count("dashboard") == 1
    assert f"dashboard: {state['dashboard']}/tensorvm" in r.stdout
    assert state["dashboard"].startswith("http://127.0.0.1:")
    assert oct(os.stat(state_dir / "cluster.json").st_mode & 0o777) == "0o600"


def test_status_shows_it(up):
    state_dir, state, _ = up
    r = tvm(state_dir, "status")
    assert r.returncode == 0, r.stderr
    assert state["address"] in r.stdout and f"{state['dashboard']}/tensorvm" in r.stdout
    for name, w in state["workers"].items():
        assert f"{name} (pid {w['pid']})" in r.stdout
    assert "3/3 running" in r.stdout  # the scheduler's own list of workers
    doc = json.loads(tvm(state_dir, "status", "--json").stdout)
    assert doc["address"] == state["address"]


def test_workers_share_the_cores_out(up):
    """Three worker processes: one thread each on a machine of up to 5 cores, never more
    threads in all than cores (unless there are more processes than cores)."""
    from dask.system import CPU_COUNT
    state_dir, state, _ = up
    assert state["threads"] == max(1, CPU_COUNT // 3)


def test_up_twice_says_it_is_already_up(up):
    state_dir, state, _ = up
    r = tvm(state_dir, "up", "--cluster", "ps=1,worker=2")
    assert r.returncode == 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"already up at {state['address']}" in lines[0], r.stderr
    other = tvm(state_dir, "up", "--cluster", "worker=3")
    assert other.returncode == 1 and "tensorvm down first" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1


def test_run_uses_it(up, tmp_path):
    state_dir, state, _ = up
    text = tmp_path / "words.txt"
    text.write_text("the cat\nthe hat\n" * 500)
    r = tvm(state_dir, "run", "wordcount", "--input", f"file://{text}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"cluster: {state['address']} (tensorvm up)" in r.stderr
    job = re.search(r"\(job (wordcount-[0-9a-f]+)\)", r.stdout).group(1)
    # the job is in that cluster's registry, its page there after the command ended
    with urllib.request.urlopen(f"{state['dashboard']}/tensorvm/api/jobs/{job}",
                                timeout=30) as resp:
        doc = json.load(resp)
    assert doc["state"] == "done" and doc["name"] == "wordcount"
    assert f"{state['dashboard']}/tensorvm/job/{job}" in r.stdout  # the link stays valid
    assert re.search(r'\bthe\W+1000\b', r.stdout), r.stdout  # the counts printed


def test_a_cluster_spec_that_does_not_fit_gets_its_own_cluster(up, monkeypatch, caplog):
    """``--cluster`` asking for more tasks than are up: not this cluster (one warning)."""
    from tensorvm.jobs.local_up import cluster_for
    state_dir, state, _ = up
    monkeypatch.setenv("TENSORVM_STATE_DIR", str(state_dir))
    assert cluster_for(None)["address"] == state["address"]
    assert cluster_for({"ps": 1, "worker": 1})["address"] == state["address"]
    with caplog.at_level("WARNING", logger="tensorvm"):
        assert cluster_for({"ps": 2}) is None
    assert "too few tasks for --cluster ps=2" in caplog.text


def test_each_job_starts_from_a_clean_cluster(up):
    """The up cluster's variables do not outlive a job run on it (a LocalCluster of the job's
    own would not keep them): ridge with another shape of its PS variable runs."""
    state_dir, state, _ = up
    for d in ("5", "3"):
        r = tvm(state_dir, "run", "ridge", "--d", d, "--steps", "5", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["state"] == "done"


def test_state_is_kept_while_another_client_uses_the_cluster(up):
    from distributed import Client

    from tensorvm.jobs.local_up import fresh_state
    state_dir, state, _ = up
    with Client(state["address"], set_as_default=False) as mine:
        with Client(state["address"], set_as_default=False):
            assert fresh_state(mine) is False
        assert fresh_state(mine) is True


def test_demo_on_the_up_cluster(up):
    """``make run`` with a cluster up: the demo runs there and its job pages stay."""
    state_dir, state, _ = up
    r = subprocess.run([sys.executable, "-m", "tensorvm.jobs.demo"], env=_env(state_dir),
                       capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"on the tensorvm up cluster at {state['address']}" in r.stdout
    assert "word count OK" in r.stdout and "ridge OK" in r.stdout
    assert "press Enter" not in r.stdout and "not on a terminal" not in r.stdout


def test_down_stops_every_process_and_removes_the_state(up):
    state_dir, state, _ = up
    r = tvm(state_dir, "down")
    assert r.returncode == 0, r.stderr
    assert f"stopped the cluster at {state['address']}" in r.stdout
    assert not os.path.exists(state_dir / "cluster.json")
    for entry in _pids(state):
        try:
            psutil.Process(entry["pid"]).wait(30)  # a worker ends once its Nanny is gone
        except psutil.Error:
            pass
        assert not _alive(entry), entry
    again = tvm(state_dir, "status")
    assert again.returncode == 3 and "no local cluster is up" in again.stdout


def test_a_stale_state_file_is_cleaned(tmp_path):
    """A state file whose cluster process is gone: removed, and a worker process it still
    lists stopped, by the first command that reads it."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_entry = {"pid": dead.pid, "created": psutil.Process(dead.pid).create_time()}
    dead.wait()
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        left_entry = {"pid": leftover.pid,
                      "created": psutil.Process(leftover.pid).create_time()}
        (tmp_path / "cluster.json").write_text(json.dumps({
            "version": 1, "address": "tcp://127.0.0.1:9", "dashboard": "http://127.0.0.1:9",
            "spec": {"ps": 1}, "threads": 1, "daemon": dead_entry,
            "workers": {"ps-0": left_entry}}))
        r = tvm(tmp_path, "status")
        assert r.returncode == 3
        assert "removed a stale state file" in r.stderr and str(dead.pid) in r.stderr
        assert not (tmp_path / "cluster.json").exists()
        assert leftover.wait(HANG_GUARD_S) is not None
        assert tvm(tmp_path, "down").stdout.strip() == "tensorvm: no local cluster is up"
    finally:
        if leftover.poll() is None:
            leftover.kill()


def test_an_unreadable_state_file_is_cleaned(tmp_path):
    (tmp_path / "cluster.json").write_text("{not json")
    r = tvm(tmp_path, "down")
    assert r.returncode == 0 and "removed an unreadable state file" in r.stderr
    assert not (tmp_path / "cluster.json").exists()


def test_make_run_demo_without_a_terminal(tmp_path):
    """``make run`` as CI runs it (no stdin, no cluster up): its own LocalCluster, both jobs
    checked against their references, and no wait for Enter."""
    r = subprocess.run([sys.executable, "-m", "tensorvm.jobs.demo"], env=_env(tmp_path),
                       capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=HANG_GUARD_S)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert "starting a LocalCluster (ps=1,worker=1)" in out
    assert re.search(r"^dashboard: http://127\.0\.0\.1:\d+/tensorvm$", out, re.M)
    assert re.search(r"word count OK: 3000 distinct words, (\d+) words .*collections\.Counter "
                     r"counts 3000 distinct, \1 words", out), out
    assert "reduce_output_records" in out  # the job's counters
    losses = [float(v) for v in re.search(r"loss by step: (.*)", out).group(1).split()[1::2]]
    assert losses[0] > losses[-1]  # the PS-trained loss falls
    assert "ridge OK" in out
    assert re.search(r"^OK in [\d.]+ s$", out, re.M)
    assert out.rstrip().endswith("not on a terminal: closing the cluster and its dashboard "
                                 "now (tensorvm up starts a cluster whose job pages stay)")
    assert "Traceback" not in r.stderr
