"""The ``tensorvm`` command line, by subprocess: every bundled job end to end (outputs
checked), a user job file with options, plans, checkpoints, and each kind of bad input with
its exit code and one line."""
import collections
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import urllib.request

import numpy as np
import pytest
from tensorvm.jobs.bundled import JobNotFound, bundled, resolve

pytestmark = pytest.mark.cluster
BIN = os.path.dirname(sys.executable)
TVM = f"{BIN}/tensorvm"
TEXT = ["the quick brown fox", "jumps over the lazy dog", "the dog sleeps", "", "a fox a dog"]


def tvm(*args, env=None, timeout=120, check_rc=None):
    out = subprocess.run([TVM, *map(str, args)], capture_output=True, text=True,
                         timeout=timeout, env={**os.environ, **(env or {})})
    if check_rc is not None:
        assert out.returncode == check_rc, (out.returncode, out.stdout, out.stderr)
    return out


def run_json(*args, **kw):
    out = tvm("run", *args, "--json", check_rc=0, **kw)
    return json.loads(out.stdout)


def tvm_here(capsys, *args) -> subprocess.CompletedProcess:
    """The same command in this process (fast; the subprocess tests cover the real thing)."""
    from tensorvm.jobs.cli import main
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, e.value.code, out, err)


def one_line_error(out, code, *words):
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tensorvm: "), out.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def cluster():
    """One LocalCluster of worker processes shared by the jobs that run with --scheduler."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as c:
        yield c.scheduler_address


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "text").mkdir()
    (d / "text" / "a.txt").write_text("\n".join(TEXT[:3]) + "\n")
    (d / "text" / "b.txt").write_text("\n".join(TEXT[3:]) + "\n")
    docs = [{"id": 1, "text": "A cat"}, {"id": 2, "text": "a dog a"}, {"id": 3, "text": "cat"}]
    (d / "docs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in docs))
    rng = np.random.default_rng(0)
    pts = np.r_[rng.normal(0, 0.1, (20, 2)), rng.normal(5, 0.1, (20, 2))]
    np.save(d / "points.npy", pts)
    edges = np.array([[0, 1], [1, 2], [2, 0], [2, 1], [3, 2]], np.int64)
    np.save(d / "edges.npy", edges)
    return d


def read_parts(folder) -> list[str]:
    lines = []
    for p in sorted(os.listdir(folder)):
        if p.startswith("part-"):
            with open(os.path.join(folder, p)) as f:
                lines += f.read().splitlines()
    assert os.path.exists(os.path.join(folder, "_SUCCESS"))
    return lines


# ---- the command itself ------------------------------------------------------------------
def test_version_help_and_jobs(capsys):
    import tensorvm
    assert tvm("--version", check_rc=0).stdout.strip() == f"tensorvm {tensorvm.__version__}"
    out = subprocess.run([sys.executable, "-m", "tensorvm", "--version"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"tensorvm {tensorvm.__version__}"
    lines = tvm_here(capsys, "jobs").stdout.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == [s.name for s in bundled()]
    assert {"wordcount", "grep", "index", "terasort", "kmeans", "pagerank", "ridge"} <= {
        ln.split()[0] for ln in lines}
    assert all(len(ln.split(None, 1)) == 2 for ln in lines)  # a description each
    helptext = tvm_here(capsys, "run", "wordcount", "--help").stdout
    for opt in ("--input", "--num-reducers", "--overwrite", "--scheduler", "--json"):
        assert opt in helptext
    # the docstring's Args section is the options' help, not a squashed paragraph above them
    ridge_help = tvm_here(capsys, "run", "ridge-ps", "--help").stdout
    assert "Args:" not in ridge_help and "the L2 penalty." in ridge_help


# ---- bundled jobs end to end ---------------------------------------------------------------
def test_wordcount_output(cluster, data):
    out = data / "wc"
    s = run_json("wordcount", "--input", f"file://{data}/text/*.txt", "--output",
                 f"file://{out}", "--num-reducers", 2, "--scheduler", cluster)
    want = collections.Counter(w for line in TEXT for w in line.split())
    got = {w: int(c) for w, c in (ln.split("\t") for ln in read_parts(out))}
    assert got == want
    assert s["counters"]["map_input_records"] == len(TEXT)
    assert s["counters"]["reduce_output_records"] == len(want)
    assert s["output"].rstrip("/").endswith("wc") and s["state"] == "done"


def test_grep_and_index_outputs(cluster, data):
    run_json("grep", "--input", f"file://{data}/text", "--pattern", "dog", "--output",
             f"file://{data}/grep", "--scheduler", cluster)
    got = dict(ln.rsplit("\t", 1) for ln in read_parts(data / "grep"))
    assert got == {ln: "1" for ln in TEXT if "dog" in ln}
    run_json("index", "--input", f"file://{data}/docs.jsonl", "--output",
             f"file://{data}/index", "--scheduler", cluster)
    got = dict(ln.split("\t") for ln in read_parts(data / "index"))
    assert got == {"a": "1,2", "cat": "1,3", "dog": "2"}


def test_teragen_terasort_teravalidate(cluster, data):
    src, dst = f"file://{data}/tera-in", f"file://{data}/tera-out"
    assert run_json("teragen", "--url", src, "--n-records", 3000, "--files", 3,
                    "--in-process")["result"] == 3000
    s = run_json("terasort", "--input", src, "--output", dst, "--sample", 500,
                 "--scheduler", cluster)
    assert s["counters"]["reduce_output_records"] == 3000
    v = run_json("teravalidate", "--output", dst, "--input", src, "--in-process")["result"]
    assert v["ok"] and v["records"] == 3000 and v["errors"] == []


def test_kmeans_and_pagerank_match_their_references(cluster, data):
    from tensorvm.jobs.kmeans import first_rows, lloyd_reference
    from tensorvm.jobs.pagerank import pagerank_reference
    pts = np.load(data / "points.npy")
    s = run_json("kmeans", "--input", f"file://{data}/points.npy", "--k", 2,
                 "--iterations", 4, "--scheduler", cluster)
    want = lloyd_reference(pts, first_rows(f"file://{data}/points.npy", 2), 4)
    np.testing.assert_allclose(np.array(s["result"]), want, rtol=1e-9)
    s = run_json("pagerank", "--input", f"file://{data}/edges.npy", "--iterations", 5,
                 "--scheduler", cluster)
    want = pagerank_reference(np.load(data / "edges.npy"), 4, 5)
    np.testing.assert_allclose(np.array(s["result"]), want, rtol=1e-9)


def test_join_output(cluster, tmp_path):
    (tmp_path / "l.csv").write_text("id,value\n1,a\n2,b\n2,bb\n4,d\n")
    (tmp_path / "r.csv").write_text("id,value\n2,x\n1,y\n3,z\n")
    run_json("join", "--left", f"file://{tmp_path}/l.csv", "--right", f"file://{tmp_path}/r.csv",
             "--output", f"file://{tmp_path}/j", "--scheduler", cluster)
    got = sorted(read_parts(tmp_path / "j"))
    want = sorted(f"{k}\t{lv}\t{rv}" for k, lv in [(1, "a"), (2, "b"), (2, "bb"), (4, "d")]
                  for k2, rv in [(2, "x"), (1, "y"), (3, "z")] if k == k2)
    assert got == want


def test_the_dashboard_link_is_printed_in_a_pipe_and_in_the_json_summary(cluster, data,
                                                                        tmp_path):
    """Logged to a file (stderr not a terminal) the link was never printed, and --json had
    none: a batch job's log must say where to watch it (stderr, once the job runs on past a
    second; the summary on a cluster that outlives the command)."""
    args = ["run", "wordcount", "--input", f"file://{data}/text/*.txt", "--scheduler", cluster]
    out = tvm(*args, "--output", f"file://{tmp_path}/a", check_rc=0)
    assert re.search(r"^dashboard: http://127\.0\.0\.1:\d+/tensorvm/job/\S+$", out.stdout,
                     re.M), out.stdout
    s = run_json(*args[1:], "--output", f"file://{tmp_path}/b")
    assert s["dashboard"].startswith("http://127.0.0.1:") and "/tensorvm/job/" in s["dashboard"]


def test_logreg_reaches_its_target(cluster):
    try:
        resolve("logreg")
    except JobNotFound as exc:
        pytest.skip(f"logreg is not loadable here: {exc}")
    s = run_json("logreg", "--workers", 1, "--steps", 100, "--rows", 4000, "--features", 5,
                 "--holdout", 2000, "--eval-every", 50, "--scheduler", cluster)
    assert s["result"]["ok"] and s["metrics"]["step"] <= 100
    assert s["result"]["heldout_loss"] <= s["result"]["target_loss"]


def test_ridge_ps_sync_and_async_reach_the_closed_form(cluster):
    """The PS ridge job over 1 PS + 1 worker of the shared cluster: sync descent equals the
    closed form (full-batch gradient steps from the job's own data), async gets close."""
    sync = run_json("ridge-ps", "--workers", 1, "--steps", 60, "--scheduler", cluster)
    r = sync["result"]
    assert sync["state"] == "done" and r["ok"] and r["mode"] == "sync"
    assert r["global_step"] == 60
    np.testing.assert_allclose(r["beta"], r["beta_closed_form"], rtol=1e-6, atol=1e-8)
    asyn = run_json("ridge-ps", "--workers", 1, "--no-sync", "--steps", 200,
                    "--scheduler", cluster)["result"]
    assert asyn["mode"] == "async" and asyn["global_step"] >= 200
    assert asyn["rel_error"] < 0.05, asyn


def test_embedding_learns_and_its_ps_bytes_do_not_grow_with_the_vocabulary():
    """The sparse embedding job on its own LocalCluster (2 PS + 2 workers): the held-out
    error falls, and one step sends the PS the same bytes for the same batch against a
    table four times larger (sparse updates scale with the rows touched)."""
    s = run_json("embedding", "--workers", 2, "--vocab", 2000, "--ratings", 30000,
                 "--steps", 300, timeout=300)
    r = s["result"]
    assert s["state"] == "done" and r["ok"] and r["global_step"] >= 300
    assert r["heldout_mse"] < 0.8 * r["heldout_mse_start"], r
    assert r["bytes_to_ps_per_step"] == r["bytes_to_ps_per_step_vocab_8000"] > 0


def test_ridge_live_display_and_keep_alive(tmp_path):
    """On its own LocalCluster (ps=1, worker=1), on a terminal: the live display shows steps
    and the loss and the dashboard link; --keep-alive keeps the dashboard up until Ctrl-C."""
    env = {**os.environ, "TTY_COMPATIBLE": "1", "COLUMNS": "120"}
    p = subprocess.Popen([TVM, "run", "ridge", "--cluster", "ps=1,worker=1", "--steps", "40",
                          "--report-every", "10", "--keep-alive"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        err = []
        for line in p.stderr:  # the keep-alive line comes after the job's display
            err.append(line)
            if "keeping the cluster up" in line:
                break
        found = re.search(r"(http://127\.0\.0\.1:\d+/tensorvm/job/[\w-]+)", err[-1])
        assert found and "keeping" in err[-1], "".join(err)
        link = found.group(1)
        job = json.loads(urllib.request.urlopen(link.replace("/job/", "/api/jobs/"),
                                                timeout=10).read())
        assert job["state"] == "done" and job["metrics"]["step"] == 40
        p.send_signal(signal.SIGINT)
        # closing its cluster takes 0.6 s quiet, ~10 s at load 18 on 2 cores: the bound only
        # tells a hang from a slow machine
        out, rest = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, rest
    shown = "".join(err)
    assert "dashboard: http://127.0.0.1" in shown and "step" in shown and "loss" in shown
    assert "40/40" in shown
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "ridge done" in out and '"ok": true' in out


# ---- a user's job file -------------------------------------------------------------------
JOB_FILE = '''
    from typing import Literal

    import tensorvm as tv
    import tensorvm.mapreduce as mr


    def first_word(lines):  # shipped to the workers by value
        return mr.emit(tv.strings.split(lines), 1)


    @tv.job
    def letters(input: str, num_reducers: int = 1, scale: float = 1.0, upper: bool = False,
                mode: Literal["count", "fail"] = "count", session=None):
        """Count words, then scale.

        Args:
            input: text files to read.
            scale: multiply each count by this.
        """
        if mode == "fail":
            raise ValueError("asked to fail")
        res = mr.Job(mr.text(input), first_word, combine="sum", reduce="sum",
                     num_reducers=num_reducers).run(session)
        tv.job.report(step=1, total_steps=1, words=float(sum(res.values)))
        return {(k.upper() if upper else k): v * scale for k, v in res.to_dict().items()}
'''


@pytest.fixture(scope="module")
def job_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("userjob") / "letters.py"
    path.write_text(textwrap.dedent(JOB_FILE))
    return path


def test_user_job_file_with_options(cluster, data, job_file):
    helptext = tvm("run", job_file, "--help", check_rc=0).stdout
    assert "Count words, then scale." in helptext
    assert "multiply each count by this" in helptext and "[count|fail]" in helptext
    s = run_json(job_file, "--input", f"file://{data}/text/a.txt", "--scale", 2,
                 "--upper", "--num-reducers", 2, "--scheduler", cluster)
    want = collections.Counter(w for line in TEXT[:3] for w in line.split())
    assert s["result"] == {k.upper(): 2.0 * v for k, v in want.items()}
    assert s["metrics"] == {"step": 1, "total_steps": 1, "words": float(sum(want.values()))}
    out = tvm("plan", job_file, "--input", f"file://{data}/text/*.txt", "--num-reducers", 2,
              "--svg",
              data / "plan.svg", "--dot", "-", check_rc=0)
    # a map-reduce job's tasks float (any worker of the job): one device per map and reducer
    assert "/job:worker/replica:0/task:*map0" in out.stdout and "digraph" in out.stdout
    svg = (data / "plan.svg").read_text()
    assert svg.startswith("<svg") and 'class="edge send"' in svg


# ---- bad input: the right code and one line ------------------------------------------------
def test_usage_errors_exit_2_with_one_line():
    one_line_error(tvm("run", "nosuchjob"), 2, "nosuchjob", "tensorvm jobs")
    one_line_error(tvm("run", "wordcount", "--input", "x", "--num-reducers", "many"), 2,
                   "--num-reducers", "many")


@pytest.mark.parametrize("argv,words", [
    (["run", "wordcount"], ["--input"]),
    (["run", "wordcount", "--input", "x", "--bogus"], ["--bogus"]),
    (["run", "wordcount", "--input", "x", "--cluster", "ps"], ["ps=1"]),
    (["run", "wordcount", "--input", "x", "--conf", "novalue"], ["KEY=VALUE"]),
    (["run", "wordcount", "--input", "x", "--in-process", "--cluster", "ps=1"],
     ["at most one"]),
    (["run", "{job_file}", "--mode", "other", "--input", "x"], ["--mode", "other"]),
    (["run", "{job_file}:nope"], ["no @tensorvm.job function named nope"]),
    (["frobnicate"], ["frobnicate"]),
])
def test_more_usage_errors_in_process(argv, words, job_file, capsys):
    """The same parser in this process (fast): exit 2 and one line on stderr."""
    one_line_error(tvm_here(capsys, *[str(a).format(job_file=job_file) for a in argv]), 2,
                   *words)


def test_missing_input_exits_2(cluster, data):
    one_line_error(tvm("run", "wordcount", "--input", f"file://{data}/none/*.txt",
                       "--scheduler", cluster), 2, "input not found", "none")


def test_unreachable_scheduler_exits_1():
    import socket
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    one_line_error(tvm("run", "wordcount", "--input", "x", "--scheduler",
                       f"tcp://127.0.0.1:{port}", "--connect-timeout", "0.2"), 1,
                   "cannot reach the Dask scheduler", str(port))


def test_failed_job_exits_1_traceback_only_when_verbose(data, job_file):
    args = ["run", job_file, "--input", f"file://{data}/text/a.txt", "--mode", "fail",
            "--in-process"]
    one_line_error(tvm(*args), 1, "job letters failed", "ValueError: asked to fail")
    out = tvm(*args, "--verbose")
    assert out.returncode == 1 and "Traceback" in out.stderr and "asked to fail" in out.stderr


def test_ctrl_c_exits_130(tmp_path):
    path = tmp_path / "forever.py"
    path.write_text(textwrap.dedent('''
        import sys, threading
        import tensorvm as tv

        @tv.job
        def forever():
            print("ready", flush=True)
            threading.Event().wait()
    '''))
    p = subprocess.Popen([TVM, "run", str(path), "--in-process", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)  # 0.1 s quiet, 1 s at load 18: a hang's bound
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and err.strip() == "tensorvm: interrupted"


# ---- checkpoints -------------------------------------------------------------------------
def test_ckpt_ls_show_verify(tmp_path, capsys):
    from tensorvm.storage import checkpoint_url, commit, write_shard
    d = f"file://{tmp_path}/ck"
    for step in (1, 2):
        c = checkpoint_url(d, "model", step)
        commit(d, c, write_shard(c, 0, 1, {"w": np.arange(6.0).reshape(2, 3) * step}),
               step=step)
    ls = tvm("ckpt", "ls", d, check_rc=0).stdout.strip().splitlines()
    assert len(ls) == 2 and "step 1" in ls[0] and "step 2" in ls[1]
    latest = ls[1].split()[0]
    rows = json.loads(tvm_here(capsys, "ckpt", "show", latest, "--json").stdout)
    assert rows[0]["name"] == "w" and rows[0]["shape"] == [2, 3]
    ok = tvm_here(capsys, "ckpt", "verify", latest)
    assert ok.returncode == 0 and ok.stdout.strip().endswith("OK")
    folder = latest.replace("file://", "")
    data_file = [os.path.join(r, f) for r, _, fs in os.walk(folder) for f in fs
                 if not f.endswith(".json")][0]
    with open(data_file, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"\x00\xff\x00")
    out = tvm("ckpt", "verify", latest)
    assert out.returncode == 1 and "problem" in out.stderr
    one_line_error(tvm_here(capsys, "ckpt", "show", f"file://{tmp_path}/nothing"), 2,
                   "no checkpoint")


# ---- a newcomer's audit: more bad input, each one line -----------------------------------
@pytest.mark.parametrize("source,words", [
    ("def f(:\n", ["cannot load job file", "SyntaxError", "line 1"]),
    ("import tensorvm_no_such_module\n", ["cannot load job file", "ModuleNotFoundError",
                                         "tensorvm_no_such_module"]),
    ("raise RuntimeError('boom at import')\n", ["cannot load job file", "boom at import"]),
])
def test_a_job_file_that_does_not_import_is_one_line(tmp_path, capsys, source, words):
    """A job file with a syntax error or a failing import printed click's whole traceback."""
    path = tmp_path / "broken.py"
    path.write_text(source)
    one_line_error(tvm_here(capsys, "run", path), 2, str(path), *words)
    one_line_error(tvm_here(capsys, "plan", path), 2, "cannot load job file")


def test_plan_export_to_an_unwritable_path_is_one_line(data, capsys, tmp_path):
    out = tvm_here(capsys, "plan", "wordcount", "--input", f"file://{data}/text",
                   "--svg", tmp_path / "no" / "such" / "dir" / "plan.svg")
    one_line_error(out, 2, "--svg", "plan.svg")


def test_existing_output_and_unwritable_output_say_what_to_fix(data, capsys, tmp_path):
    """A committed output said 'pass overwrite=True' (the Python API's spelling) and exited
    1; an output under a missing root was reported as 'input not found'."""
    args = ["run", "wordcount", "--input", f"file://{data}/text", "--in-process"]
    out = f"file://{tmp_path}/wc"
    assert tvm_here(capsys, *args, "--output", out).returncode == 0
    line = one_line_error(tvm_here(capsys, *args, "--output", out), 2, "already exists",
                          "--overwrite")
    assert "overwrite=True" not in line
    assert tvm_here(capsys, *args, "--output", out, "--overwrite").returncode == 0
    line = one_line_error(tvm_here(capsys, *args, "--output", "/proc/tvm-no/wc"), 2,
                          "/proc/tvm-no/wc")
    assert "input" not in line
    line = one_line_error(tvm_here(capsys, "run", "wordcount", "--input",
                                   f"{tmp_path}/none.txt", "--in-process"), 2, "none.txt")
    assert line.count("not found") == 1, line


def test_sigterm_mid_job_exits_143_with_no_output_and_a_rerun_works(tmp_path):
    """SIGTERM (what Kubernetes, Slurm and systemd send) killed the command at once: no line,
    the output's _temporary left behind. Now it is an interruption like Ctrl-C."""
    path = tmp_path / "slow.py"
    path.write_text(textwrap.dedent('''
        import os, time
        import tensorvm as tv, tensorvm.mapreduce as mr

        def slow(lines):
            def wait(x):
                if not os.path.exists(os.environ["TVM_GO"]):
                    print("ready", flush=True)
                    # running until the test has sent SIGTERM and says so (TVM_SENT): the
                    # in-process thread is joined at exit, so a fixed sleep here was waited out
                    end = time.monotonic() + 60
                    while not os.path.exists(os.environ["TVM_SENT"]) and time.monotonic() < end:
                        time.sleep(0.02)
                return x
            return mr.emit(tv.py_func(wait, [lines], tv.string, stateful=False), 1)

        @tv.job
        def slowjob(input: str, output: str, session=None):
            return mr.Job(mr.text(input), slow, reduce="sum",
                          output=mr.text_output(output)).run(session)
    '''))
    (tmp_path / "in.txt").write_text("a\nb\n")
    out, go = tmp_path / "out", tmp_path / "go"
    argv = [TVM, "run", str(path), "--input", str(tmp_path / "in.txt"), "--output",
            f"file://{out}", "--in-process", "--quiet"]
    sent = tmp_path / "sent"
    env = {**os.environ, "TVM_GO": str(go), "TVM_SENT": str(sent)}
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    try:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGTERM)  # handled in the main thread before the step returns
        sent.write_text("")
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143 and err.strip() == "tensorvm: terminated", (p.returncode, err)
    assert not out.exists() or os.listdir(out) == []  # nothing torn, no _temporary
    go.write_text("")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(read_parts(out)) == ["a\t1", "b\t1"]


def test_ckpt_verify_of_no_checkpoint_is_usage(tmp_path, capsys):
    """verify of a path with no checkpoint exited 1 with two lines; show exits 2 with one."""
    one_line_error(tvm_here(capsys, "ckpt", "verify", f"file://{tmp_path}/nothing"), 2,
                   "no checkpoint", "nothing")


def test_plan_export_shows_the_largest_plan_in_process(capsys, tmp_path):
    job = tmp_path / "fit_job.py"
    job.write_text(
        "import tensorvm as tv\n\n\n@tv.job\ndef fit(steps: int = 3, session=None):\n"
        "    w = tv.Variable(0.0, name='w')\n"
        "    train = tv.train.GradientDescentOptimizer(0.1).minimize(tv.square(w - 1.0))\n"
        "    session.run(tv.global_variables_initializer())\n"
        "    for _ in range(steps):\n        session.run(train)\n")
    out = tvm_here(capsys, "plan", job, "--dot", "-")
    assert out.returncode == 0, out.stderr
    dot = out.stdout[out.stdout.index("digraph"):]
    assert "ApplyGradientDescent" in dot, dot[:500]
