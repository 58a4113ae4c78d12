"""Floating tasks on a LocalCluster of two worker processes (issue 23): a map-reduce job's map
tasks spread over the workers with no pin, one per split; a worker killed mid-job costs only
the lost map tasks (Dask recomputes them from lineage), not a whole-job rerun; a plain graph's
floating ops run on the Dask plane step after step. Map calls are recorded by the map function
itself (worker name and split digest, one line a call)."""
import collections

import numpy as np
import pytest

import tensorvm as tv
import tensorvm.mapreduce as mr
from tensorvm.mapreduce.common import run_options

TV_CLUSTER = {"worker": 2}
SPLIT = 2048

pytestmark = pytest.mark.cluster


def _corpus(folder, n_files=3, n_lines=200):
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(200)]
    expected = collections.Counter()
    folder.mkdir()
    for f in range(n_files):
        lines = [" ".join(vocab[i] for i in rng.integers(0, 200, rng.integers(3, 10)))
                 for _ in range(n_lines)]
        (folder / f"in-{f}.txt").write_text("\n".join(lines) + "\n")
        expected.update(w for line in lines for w in line.split())
    return f"{folder.as_uri()}/*.txt", expected


def _recording(log, kill_after=None):
    """The map's Python step (stateless: it floats with its map task): one line ``worker
    name<TAB>digest`` per call; with ``kill_after``, worker-1 kills its own process (once,
    marked by ``log + '.killed'``) on its call after that many."""
    def fn(lines):
        import hashlib
        import os
        import signal

        from distributed import get_worker
        name = str(get_worker().name)
        if kill_after is not None and name.endswith("1"):
            with open(log) as f:
                mine = sum(1 for line in f if line.startswith(name + "\t"))
            if mine >= kill_after:
                try:
                    open(log + ".killed", "x").close()
                except FileExistsError:
                    pass
                else:
                    os.kill(os.getpid(), signal.SIGKILL)  # its finished map outputs go too
        digest = hashlib.md5(repr(list(lines)).encode()).hexdigest()
        with open(log, "a") as f:
            f.write(f"{name}\t{digest}\n")
        return lines
    return fn


def _job(src, log, **kw):
    fn = _recording(str(log), kw.pop("kill_after", None))
    return mr.Job(mr.text(src, split_size=SPLIT),
                  lambda lines: mr.emit(tv.strings.split(
                      tv.py_func(fn, [lines], tv.string, stateful=False)), 1),
                  combine="sum", reduce="sum", num_reducers=2, name="floating", **kw)


def _calls(log):
    return [tuple(line.split("\t")) for line in log.read_text().splitlines() if line]


def test_map_tasks_spread_over_the_workers_one_per_split(cluster, tmp_path):
    src, expected = _corpus(tmp_path / "in")
    log = tmp_path / "maps.log"
    log.touch()
    job = _job(src, log)
    n_splits = len(job.input.splits())
    res = job.run(cluster.session())
    assert res.to_dict() == dict(expected)
    assert res.num_map_tasks == n_splits > 2
    calls = _calls(log)
    assert len(calls) == n_splits
    assert {name for name, _ in calls} == {"worker-0", "worker-1"}, calls


@pytest.mark.timeout(180)
def test_a_killed_worker_costs_only_its_lost_map_tasks(cluster, tmp_path):
    src, expected = _corpus(tmp_path / "in", n_files=4)
    log = tmp_path / "maps.log"
    log.touch()
    out = tmp_path / "out"
    job = _job(src, log, kill_after=1, output=mr.text_output(out.as_uri()))
    n_splits = len(job.input.splits())
    res = job.run(cluster.session())
    assert (tmp_path / "maps.log.killed").exists()
    got = collections.Counter()
    for p in sorted(out.glob("part-r-*")):
        for line in p.read_text().splitlines():
            k, v = line.split("\t")
            assert k not in got
            got[k] = int(v)
    assert got == expected and (out / "_SUCCESS").exists()
    assert res.attempts == 1, "the job ran again whole"
    calls = _calls(log)
    assert len({d for _, d in calls}) == n_splits
    # only the killed worker's map tasks ran again, never the whole job's
    assert len(calls) < 2 * n_splits, (len(calls), n_splits)


def test_floating_ops_of_a_plain_graph_run_step_after_step(cluster):
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [3])
        with tv.device("/job:worker/task:0"):
            v = tv.Variable(np.ones(3, np.float32), name="v")
        with tv.device("/job:worker/task:*a"):
            y = x * 2.0 + 1.0
        with tv.device("/job:worker/task:*b"):
            z = tv.reduce_sum(y * v)
        init = tv.global_variables_initializer()
    s = cluster.session(graph=g)
    s.run(init)
    for i in range(3):  # the second and later runs would go direct if they could
        assert s.run(z, {x: [1.0, 2.0, float(i)]}) == 3.0 + 5.0 + 2.0 * i + 1.0


def _fails_once_marked(folder):
    def fn(x):
        import os
        open(os.path.join(folder, "failing"), "w").close()
        raise ValueError("a value the step cannot take")
    return fn


def _ends_after_the_failure(folder):
    """Waits (bounded) for the failing task's mark, lasts 0.5 s more, then marks ``ended``:
    an op in flight when its step failed."""
    def fn(x):
        import os
        import time
        give_up = time.monotonic() + 60
        while not os.path.exists(os.path.join(folder, "failing")) and \
                time.monotonic() < give_up:
            time.sleep(0.01)
        time.sleep(0.5)
        open(os.path.join(folder, "ended"), "w").close()
        return x
    return fn


def test_a_failed_step_returns_once_no_task_of_it_runs(cluster, tmp_path):
    """CI's failure (stop 31: a map task still running when its job failed spilled its buckets
    after the job had removed its scratch). With the options of a map-reduce job's steps
    (``wait_on_error``, as TF's Session.run waits for every executor of a step), a failed
    step returns only once its tasks in flight have ended: whatever the caller cleans up
    after the error stays clean. (By default the error comes back at once:
    test_runtime_cluster.py::test_failed_step_cancels_its_other_parts.)"""
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [2])
        with tv.device("/job:worker/task:*a"):
            bad = tv.py_func(_fails_once_marked(str(tmp_path)), [x], tv.float32,
                             stateful=False)
        with tv.device("/job:worker/task:*b"):
            slow = tv.py_func(_ends_after_the_failure(str(tmp_path)), [x], tv.float32,
                              stateful=False)
    s = cluster.session(graph=g)
    with pytest.raises(tv.errors.OpError, match="cannot take"):
        s.run([bad, slow], {x: [1.0, 2.0]}, options=run_options())
    assert (tmp_path / "failing").exists()
    assert (tmp_path / "ended").exists(), "the step returned while its other task still ran"
