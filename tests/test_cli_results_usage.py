"""Issue 25 items 5, 7, 8: results never dropped, usage errors before anything starts, help
that states formats and units, and the terminal display in the job's language — by real
subprocesses (and a real terminal: tmux)."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

BIN = os.path.dirname(sys.executable)
TVM = f"{BIN}/tensorvm"


def tvm(*args, timeout=300, cwd=None):
    return subprocess.run([TVM, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def usage_error(out, *words) -> str:
    """Exit 2, one line on stderr, nothing started (no cluster line, no dashboard link)."""
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tensorvm: "), out.stderr
    assert "dashboard" not in out.stderr + out.stdout and "starting" not in out.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("results")
    (d / "grep.txt").write_text("".join(f"line {i:04d} zyvk\n" for i in range(1019)) +
                                "no match here\n")
    (d / "edges.txt").write_text("0 1\n1 2\n2 0\n2 1\n3 2\n")
    rng = np.random.default_rng(0)
    np.save(d / "edges.npy", rng.integers(0, 300, (3000, 2)).astype(np.int64))
    pts = np.r_[rng.normal(0, 0.1, (50, 2)), rng.normal(5, 0.1, (50, 2))]
    np.save(d / "points.npy", pts)
    return d


# ---- usage errors: exit 2, one line, before anything starts ------------------------------
def test_a_job_name_typo_says_did_you_mean():
    usage_error(tvm("run", "wordcnt", "--input", "x"), "no job 'wordcnt'",
                "did you mean 'wordcount'?")


def test_an_unknown_cluster_task_name_fails_before_a_cluster_starts(data):
    line = usage_error(tvm("run", "wordcount", "--input", data / "grep.txt",
                           "--cluster", "ps=1,workers=2"),
                       "unknown task name 'workers'", "did you mean 'worker'?")
    assert "--cluster" in line
    # a job that needs a task name the spec lacks
    usage_error(tvm("run", "ridge-ps", "--cluster", "ps=1"), "needs", "'worker'")


@pytest.mark.parametrize("args,words", [
    (["wordcount", "--input", "x", "--num-reducers", "abc"], ["'abc' is not a valid integer"]),
    (["wordcount", "--input", "x", "--cluster", "ps"], ["write JOB=N"]),
    (["wordcount", "--input", "x", "--conf", "novalue"], ["KEY=VALUE"]),
])
def test_option_types_and_formats_are_usage_errors(args, words):
    usage_error(tvm("run", *args), *words)


def test_pagerank_of_a_text_edge_list_is_a_usage_error_naming_the_format(data):
    usage_error(tvm("run", "pagerank", "--input", data / "edges.txt"),
                "pagerank reads .npy", "edges.txt")
    usage_error(tvm("run", "kmeans", "--input", data / "grep.txt", "--k", "2"),
                "kmeans reads .npy", "grep.txt")


def test_teragen_refuses_an_existing_folder_without_overwrite(tmp_path):
    out = tmp_path / "tera"
    out.mkdir()
    (out / "gen-00000").write_bytes(b"x" * 100)
    usage_error(tvm("run", "teragen", "--url", out, "--n-records", "10"),
                "already exists", "--overwrite")
    assert (out / "gen-00000").read_bytes() == b"x" * 100
    ok = tvm("run", "teragen", "--url", out, "--n-records", "10", "--files", "1",
             "--overwrite", "--in-process", "--json")
    assert ok.returncode == 0, ok.stderr
    assert sorted(os.listdir(out)) == ["gen-00000"] and (out / "gen-00000").stat().st_size \
        == 1000


def test_an_existing_output_is_refused_before_a_cluster_starts(data, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep").write_text("x")
    usage_error(tvm("run", "wordcount", "--input", data / "grep.txt", "--output", out),
                "already exists", "--overwrite")


# ---- help ---------------------------------------------------------------------------------
def test_every_option_has_help_with_units_and_no_rst():
    from tensorvm.jobs.bundled import bundled
    from tensorvm.jobs.cli import job_command
    for spec in bundled():
        cmd = job_command(spec, lambda **kw: 0)
        for p in cmd.params:
            assert p.help, f"{spec.name} --{p.name} has no help"
            assert "``" not in p.help, (spec.name, p.help)
            if p.name == "split_size":
                assert "bytes" in p.help, p.help
            if p.name in ("input", "url", "output"):
                assert re.search(r"URL|folder", p.help), (spec.name, p.help)
        assert "``" not in (cmd.help or ""), spec.name
    out = tvm("run", "pagerank", "--help").stdout
    assert ".npy" in out and "edge list" in out and "``" not in out


def test_jobs_lists_whole_first_sentences():
    out = tvm("jobs")
    assert out.returncode == 0
    for line in out.stdout.splitlines():
        name, text = line.split(None, 1)
        assert text.rstrip().endswith("."), line
        assert "..." not in text and "workers workers" not in text, line
        assert "files files" not in text, line


# ---- results never dropped ----------------------------------------------------------------
def test_grep_with_many_results_prints_the_first_lines_and_how_to_get_all(data, tmp_path):
    out = tvm("run", "grep", "--input", data / "grep.txt", "--pattern", "zyvk", "--in-process")
    assert out.returncode == 0, out.stderr
    shown = [ln for ln in out.stdout.splitlines() if ln.startswith("line ")]
    assert shown == [f"line {i:04d} zyvk\t1" for i in range(len(shown))] and 0 < len(shown) < 50
    assert f"{1019 - len(shown)} more: pass --output URL" in out.stdout
    doc = json.loads(tvm("run", "grep", "--input", data / "grep.txt", "--pattern", "zyvk",
                         "--in-process", "--json").stdout)
    assert doc["result_total"] == 1019 and len(doc["result"]) <= 1000
    dest = tmp_path / "g"
    out = tvm("run", "grep", "--input", data / "grep.txt", "--pattern", "zyvk", "--in-process",
              "--output", dest)
    assert out.returncode == 0, out.stderr
    lines = []
    for p in sorted(os.listdir(dest)):
        if p.startswith("part-"):
            lines += (dest / p).read_text().splitlines()
    assert sorted(lines) == [f"line {i:04d} zyvk\t1" for i in range(1019)]
    assert "more: pass --output" not in out.stdout


def test_pagerank_prints_its_top_ranks_and_writes_all_with_output(data, tmp_path):
    from tensorvm.jobs.pagerank import pagerank_reference
    edges = np.load(data / "edges.npy")
    want = pagerank_reference(edges, int(edges.max()) + 1, 20)
    out = tvm("run", "pagerank", "--input", data / "edges.npy", "--in-process")
    assert out.returncode == 0, out.stderr
    top = [int(i) for i in np.argsort(-want)[:10]]
    rows = re.findall(r"^\s*(\d+)\s+(\d\.\d+(?:e-\d+)?)$", out.stdout, re.M)
    assert [int(n) for n, _ in rows] == top, out.stdout
    np.testing.assert_allclose([float(x) for _, x in rows], want[top], rtol=1e-5)
    assert "top 10 of 300 nodes" in out.stdout and "pass --output URL" in out.stdout
    assert len(out.stdout.splitlines()) < 40 and "[" not in out.stdout
    dest = tmp_path / "ranks"
    out = tvm("run", "pagerank", "--input", data / "edges.npy", "--in-process",
              "--output", dest)
    assert out.returncode == 0, out.stderr
    assert (dest / "_SUCCESS").exists()
    rows = [ln.split("\t") for p in sorted(os.listdir(dest)) if p.startswith("part-")
            for ln in (dest / p).read_text().splitlines()]
    got = np.zeros(len(want))
    for node, rank in rows:
        got[int(node)] = float(rank)
    assert len(rows) == len(want) and np.allclose(got, want)


def test_kmeans_prints_rounded_centroids(data):
    out = tvm("run", "kmeans", "--input", data / "points.npy", "--k", "2", "--in-process")
    assert out.returncode == 0, out.stderr
    rows = re.findall(r"^\s*centroid (\d+)\s+(.*)$", out.stdout, re.M)
    assert [r[0] for r in rows] == ["0", "1"], out.stdout
    cents = sorted(tuple(float(x) for x in r[1].split()) for r in rows)
    assert np.allclose(cents, [(0, 0), (5, 5)], atol=0.1)
    assert all(len(x.split(".")[-1]) <= 4 for r in rows for x in r[1].split())


# ---- inputs are not outputs; counters are the bytes written -------------------------------
def test_terasort_of_a_folder_of_part_files_and_its_byte_counters(tmp_path):
    src = tmp_path / "in"
    assert tvm("run", "teragen", "--url", src, "--n-records", "3000", "--files", "3",
               "--in-process", "--quiet").returncode == 0
    for i, name in enumerate(sorted(os.listdir(src))):
        os.rename(src / name, src / f"part-{i:05d}.bin")
    out = tvm("run", "terasort", "--input", f"{src}/", "--output", tmp_path / "out",
              "--in-process", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    parts = [p for p in os.listdir(tmp_path / "out") if p.startswith("part-")]
    written = sum((tmp_path / "out" / p).stat().st_size for p in parts)
    assert written == 300_000 and doc["counters"]["reduce_output_bytes"] == written
    assert doc["counters"]["reduce_output_records"] == 3000


def test_a_folder_with_temporary_and_no_success_is_still_refused(tmp_path):
    import tensorvm as tv
    from tensorvm import storage
    out = tmp_path / "half"
    (out / "_temporary").mkdir(parents=True)
    (out / "part-r-00000").write_text("a\n")
    with pytest.raises(tv.errors.DataLossError, match="never committed"):
        storage.splits(str(out), format="text")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "part-00000.txt").write_text("a\nb\n")
    assert len(storage.splits(str(plain), format="text")) == 1


def test_a_late_attempt_after_abort_leaves_no_temporary(tmp_path):
    """Ctrl-C: the driver aborts the job while a reducer still runs on a worker; the
    reducer's file lands after the abort. It must remove itself (and the emptied folders)."""
    from tensorvm import storage
    url = str(tmp_path / "out")
    owner = storage.OutputCommitter(url)
    owner.setup_job()
    owner.abort_job()
    assert not os.path.exists(os.path.join(url, "_temporary"))
    late = storage.OutputCommitter(url)  # what a worker's writer builds
    storage.write_output(late, 0, "a1", ["x"], format="text", name="part-r-00000")
    assert not os.path.exists(os.path.join(url, "_temporary")), os.listdir(url)
    # while the job is open, the writer's file stays
    owner = storage.OutputCommitter(url)
    owner.setup_job(overwrite=True)
    storage.write_output(storage.OutputCommitter(url), 0, "a2", ["x"], format="text")
    assert os.listdir(os.path.join(url, "_temporary"))
    owner.abort_job()


def test_hash_and_range_partition_take_the_same_form():
    import tensorvm.mapreduce as mr
    assert mr.hash_partition() == mr.hash_partition
    assert mr.range_partition() == mr.range_partition(sample=10000)
    job = mr.Job(mr.text("memory://x"), lambda x: mr.emit(x, 1), partition=mr.range_partition)
    assert job.partition == mr.range_partition()


# ---- the terminal display (tmux: what a person sees) --------------------------------------
def _tmux_run(tmp_path, argv, timeout=600) -> tuple[str, int]:
    """Run ``argv`` in a detached tmux pane (200x50); return the final screen and exit code."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    session = f"tvm-{uuid.uuid4().hex[:8]}"
    rc_file = tmp_path / f"{session}.rc"
    cmd = " ".join(map(_q, argv)) + f"; echo $? > {_q(rc_file)}; sleep 600"
    tmux = ["tmux", "-L", session]  # a server of its own: none shared with other tests
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "200", "-y", "50",
                    "bash", "-c", cmd], check=True, env={**os.environ, "TERM": "xterm"})
    try:
        deadline = time.monotonic() + timeout
        while not rc_file.exists() or not rc_file.read_text().strip():
            assert time.monotonic() < deadline, "the command did not finish"
            time.sleep(0.1)
        screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", session, "-S", "-200"],
                                capture_output=True, text=True, check=True).stdout
        return screen.rstrip() + "\n", int(rc_file.read_text())
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def _q(x) -> str:
    import shlex
    return shlex.quote(str(x))


@pytest.mark.cluster
def test_the_display_of_a_word_count_counts_splits_and_reducers(tmp_path):
    src = tmp_path / "text"
    src.mkdir()
    words = " ".join(f"w{i}" for i in range(200))
    (src / "a.txt").write_text((words + "\n") * 250)  # 272,250 bytes: 50 splits of 5445
    size = (src / "a.txt").stat().st_size // 50
    screen, rc = _tmux_run(tmp_path, [TVM, "run", "wordcount", "--input", src / "a.txt",
                                      "--split-size", size, "--num-reducers", "4",
                                      "--output", tmp_path / "out", "--cluster", "worker=2"])
    assert rc == 0, screen
    assert re.search(r"starting LocalCluster \(2 workers", screen), screen
    assert re.search(r"splits\s.*50/50", screen), screen
    assert re.search(r"reducers\s.*4/4", screen), screen
    assert re.search(r"records/s", screen) and re.search(r"B/s", screen), screen
    assert screen.count("dashboard: http") == 1, screen
    assert not re.search(r"^\s*map\s.*\d+/\d+", screen, re.M), screen  # no Dask-stage labels


@pytest.mark.cluster
def test_the_display_of_training_stopped_at_its_target_shows_the_final_step(tmp_path):
    screen, rc = _tmux_run(tmp_path, [TVM, "run", "logreg", "--workers", "2", "--steps", "20000",
                                      "--rows", "4000", "--features", "5", "--holdout",
                                      "2000", "--eval-every", "50", "--cluster",
                                      "ps=1,worker=2"])
    assert rc == 0, screen
    step = re.search(r"global_step\D+(\d+)", screen)
    assert step, screen
    final = step.group(1)
    assert re.search(rf"step\s.*\b{final}/20000\b", screen), screen
    assert "stopped at step" in screen, screen


def test_an_interrupted_job_leaves_no_temporary_once_its_workers_are_gone(tmp_path,
                                                                           monkeypatch):
    """Ctrl-C mid-step: the driver aborts at once, but a reducer killed mid-write (its
    worker closed with the cluster) leaves a file no committer owns; the CLI's run sweeps
    it after the session closes (tensorvm.mapreduce.job.sweep_interrupted)."""
    import tensorvm as tv
    import tensorvm.mapreduce as mr
    from tensorvm.mapreduce.recovery import sweep_interrupted
    (tmp_path / "a.txt").write_text("a b\nc\n")
    out = tmp_path / "out"
    job = mr.Job(mr.text(str(tmp_path / "a.txt")), lambda x: mr.emit(x, 1),
                 output=mr.text_output(str(out)), num_reducers=2)
    sess = tv.Session(graph=tv.Graph())

    def interrupted(*a, **k):
        killed = out / "_temporary" / "attempt_00001_x"  # what a killed reducer left
        killed.mkdir(parents=True)
        (killed / "part-r-00001").write_text("half")
        raise KeyboardInterrupt
    monkeypatch.setattr(sess, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        job.run(sess)
    sess.close()
    sweep_interrupted()
    assert not (out / "_temporary").exists(), list(out.rglob("*"))
    # a live job's output is left alone
    from tensorvm import storage
    owner = storage.OutputCommitter(str(out))
    owner.setup_job(overwrite=True)
    storage.OutputCommitter(str(out)).remove_debris()
    assert (out / "_temporary" / "_job").exists()
    owner.abort_job()
