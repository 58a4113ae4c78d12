"""``tv.train.ClusterCoordinator`` on a LocalCluster of worker processes ({ps: 1, worker: 2}):
schedule / join / done / fetch against NumPy's closed form, per-worker values, errors of a
closure, and bad input (error class and message)."""
import threading

import numpy as np
import pytest

import tensorvm as tv
from tensorvm.train.coordinator import ClusterCoordinator

TV_CLUSTER = {"ps": 1, "worker": 2}

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _adder(dim=3, exactly_once=False):
    """Step ``i`` adds ``x_i`` (fed) to ``w`` on the PS and one to ``count``; it returns
    ``sum(x_i**2)``, computed on the worker. The sum of the updates does not depend on their
    order, so the final ``w`` is NumPy's ``X.sum(0)`` however the workers interleave."""
    def model_fn(ctx):
        x = tv.placeholder(tv.float32, [dim], name="x")
        w = tv.Variable(np.zeros(dim, np.float32), name="w")
        count = tv.Variable(np.int64(0), name="count")
        # a local variable on the worker: a step needs the worker's own state
        one = tv.Variable(np.int64(1), name="one", trainable=False,
                          collections=["local_variables"])
        sq = tv.reduce_sum(x * x)
        step = tv.group(w.assign_add(x), count.assign_add(one.read_value()))
        return {"x": x, "w": w, "count": count, "sq": sq, "step": step}
    return model_fn


def _step(worker, xi):
    m = worker.model
    return worker.run([m["step"], m["sq"]], {m["x"]: xi})[1]


@pytest.fixture
def clean(cluster):
    tv.Session.reset(cluster.address)
    cluster.wait_full()
    return cluster


def test_schedule_join_fetch_equal_numpy(clean):
    X = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    sess = clean.session(graph=tv.Graph())
    with ClusterCoordinator(sess, _adder()) as coord:
        rvs = [coord.schedule(_step, args=(X[i],)) for i in range(len(X))]
        coord.join()
        assert coord.done()
        got = coord.fetch(rvs)
        w, count = coord.run_on_chief(["w", "count"])
        by_worker = coord.steps_by_worker()
        assert coord.counters() == {"applied": len(X), "dropped": 0}
    np.testing.assert_allclose(got, (X * X).sum(1), rtol=1e-6)
    assert all(rv.done() and rv.worker in ("worker-0", "worker-1") for rv in rvs)
    # 40 float32 additions in some order: |error| <= 40 * eps * sum|x|
    np.testing.assert_allclose(w, X.sum(0), atol=40 * 1.2e-7 * np.abs(X).sum(0).max())
    assert count == len(X)
    assert sum(by_worker.values()) == len(X) and set(by_worker) <= {"worker-0", "worker-1"}


def test_every_live_worker_takes_closures(clean):
    """Two closures that each wait for the other to start can only both finish if two
    workers run at once (one worker would wait for ever: the test's timeout says so)."""
    sess = clean.session(graph=tv.Graph())
    both = threading.Barrier(2, timeout=60)

    def meet(worker):
        both.wait()
        return worker.name, worker.run(worker.model["count"])

    with ClusterCoordinator(sess, _adder(), exactly_once=False) as coord:
        rvs = [coord.schedule(meet) for _ in range(2)]
        coord.join()
        names = sorted(rv.fetch()[0] for rv in rvs)
    assert names == ["worker-0", "worker-1"]


def test_a_closures_error_is_raised_by_fetch_and_once_by_join(clean):
    sess = clean.session(graph=tv.Graph())
    release = threading.Event()

    def fails(worker):
        raise ValueError("bad closure")

    def waits(worker):
        release.wait(60)
        return 1

    with ClusterCoordinator(sess, _adder(), exactly_once=False) as coord:
        blocker = [coord.schedule(waits) for _ in range(2)]  # both workers busy
        bad = coord.schedule(fails)
        queued = coord.schedule(lambda worker: 2)  # cancelled by the error
        release.set()
        with pytest.raises(ValueError, match="bad closure"):
            coord.join()
        with pytest.raises(ValueError, match="bad closure"):
            bad.fetch()
        with pytest.raises(tv.errors.CancelledError,
                           match="closure cancelled: an earlier closure failed: ValueError: "
                                 "bad closure"):
            queued.fetch()
        assert [rv.fetch() for rv in blocker] == [1, 1]
        assert coord.done()  # the error was raised once, then cleared
        assert coord.schedule(lambda worker: 3).fetch() == 3


def test_per_worker_dataset_is_built_on_each_worker(clean):
    """``create_per_worker_dataset``: each worker's value is built in its graph on its device
    (a cycling batch over that worker's shard, read on the worker): every closure gets its
    own worker's next batch."""
    X = np.arange(24, dtype=np.float32).reshape(12, 2)
    sess = clean.session(graph=tv.Graph())

    def dataset_fn(ctx):
        shard = X[ctx.task::ctx.num_workers]
        return tv.train.cycling_batch([shard], 2, device=ctx.device, name="ds")[0]

    def read(worker, batch):
        return worker.task, worker.run(batch)

    with ClusterCoordinator(sess, _adder(), exactly_once=False) as coord:
        ds = coord.create_per_worker_dataset(dataset_fn)
        rvs = [coord.schedule(read, args=(iter(ds),)) for _ in range(6)]
        coord.join()
        seen: dict = {}
        for rv in rvs:
            task, batch = rv.fetch()
            seen.setdefault(task, []).append(batch)
    for task, batches in seen.items():
        shard = X[task::2]
        for t, b in enumerate(batches):  # the worker's t-th batch: rows 2t, 2t+1 (mod 6)
            np.testing.assert_array_equal(b, shard[[(2 * t) % 6, (2 * t + 1) % 6]])


# ---- bad input ---------------------------------------------------------------------------------
def test_schedule_of_a_non_callable_is_a_type_error(clean):
    sess = clean.session(graph=tv.Graph())
    with ClusterCoordinator(sess, _adder(), exactly_once=False) as coord:
        with pytest.raises(TypeError, match=r"ClusterCoordinator.schedule needs a callable "
                                            r"fn\(worker, \*args, \*\*kwargs\); got str 'step'"):
            coord.schedule("step")
        with pytest.raises(TypeError, match="schedule's kwargs must be a dict, got list"):
            coord.schedule(_step, kwargs=[1])


def test_a_cluster_without_a_worker_job_is_refused(clean):
    sess = clean.session(graph=tv.Graph(), cluster={"ps": 1, "trainer": 2})
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"ClusterCoordinator needs a cluster with a 'worker' job to "
                             r"schedule to; the session's cluster has the jobs \['ps', "
                             r"'trainer'\]"):
        ClusterCoordinator(sess, _adder())


def test_an_in_process_session_is_refused():
    with tv.Session(graph=tv.Graph()) as sess:
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match="ClusterCoordinator needs a distributed session"):
            ClusterCoordinator(sess, _adder())


def test_join_after_close_is_a_failed_precondition(clean):
    sess = clean.session(graph=tv.Graph())
    coord = ClusterCoordinator(sess, _adder(), exactly_once=False)
    coord.close()
    for call in (coord.join, coord.done, lambda: coord.schedule(_step, args=(None,))):
        with pytest.raises(tv.errors.FailedPreconditionError,
                           match=r"the ClusterCoordinator is closed \(close\(\) was called\): "
                                 "schedule, join and done need an open coordinator"):
            call()


def test_workers_not_named_after_tasks_are_mapped_by_the_coordinator():
    """A plain LocalCluster (workers named 0, 1), a session joined by address and a
    {ps: 1, worker: 1} spec, as the CLI's ``--scheduler`` runs give: the coordinator maps the
    worker task onto a worker that holds no task and runs closures there (it found no worker
    named worker-0 and waited for ever: ``tensorvm run logreg --scheduler`` hung)."""
    from distributed import LocalCluster

    def model_fn(ctx):  # the variables and their initial values on the PS only: the
        with tv.device("/job:ps/task:0"):  # coordinator's init does not map the worker task
            count = tv.Variable(np.int64(0), name="count")
        one = tv.Variable(np.int64(1), name="one", collections=["local_variables"])
        return {"count": count, "step": count.assign_add(one.read_value())}

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as lc, \
            tv.Session(lc.scheduler_address, graph=tv.Graph(), verbose=False) as sess, \
            ClusterCoordinator(sess, model_fn, cluster={"ps": 1, "worker": 1},
                               exactly_once=False) as coord:
        rvs = [coord.schedule(lambda w: (w.run(w.model["step"]), w.name)[1])
               for _ in range(10)]
        coord.join(timeout=120)
        assert int(coord.run_on_chief("count")) == 10
        assert len({rv.worker for rv in rvs}) == 1
        mapped = coord._chief_sess.devices
        assert mapped["ps-0"] != mapped["worker-0"], mapped
