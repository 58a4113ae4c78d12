"""Reliability of the direct data plane (issues 12 and 13) on a LocalCluster of worker
processes:

* a client that dies mid-step (SIGKILL) leaves no step running on the workers: the worker sees
  the step's connection close and cancels the step, so a sync token wait of a crashed
  training program gives up without taking a token (on the Dask plane the scheduler releases
  a lost client's tasks);
* waiting steps (sync replicas' token waits) never take the threads of the steps they wait
  for: more waiting replicas than the worker's step threads still see the chief's release;
  past ``WAITING_STEPS`` a step fails with ``ResourceExhaustedError`` instead of hanging.
"""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.framework.op_def_library import apply_op

pytestmark = [pytest.mark.cluster, pytest.mark.filterwarnings("ignore::ResourceWarning")]

TV_CLUSTER = {"ps": 1, "worker": 2}
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state
DIRECT = tv.RunOptions(data_plane="direct")


def _gate_graph(gate):
    """A token wait and a release on the PS (the sync optimizer's gate ops, by hand)."""
    g = tv.Graph()
    with g.as_default(), tv.device("/job:ps/task:0"):
        local = tv.placeholder(tv.int64, [], name="local_step")
        step = tv.placeholder(tv.int64, [], name="release_step")
        wait = apply_op("SyncTokenWait", [local], {"gate": gate}).outputs[0]
        release = apply_op("SyncTokenRelease", [step], {"gate": gate, "tokens": 1}).outputs[0]
    return g, local, step, wait, release


def _release_graph(gate, n):
    g = tv.Graph()
    with g.as_default(), tv.device("/job:ps/task:0"):
        step = tv.placeholder(tv.int64, [], name="release_step")
        release = apply_op("SyncTokenRelease", [step], {"gate": gate, "tokens": n}).outputs[0]
    return g, step, release


def _token_waits(dask_worker):
    """Threads of this worker process inside a token wait's kernel now."""
    n = 0
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_name == "_token_wait_kernel":
                n += 1
                break
            frame = frame.f_back
    return n


def _running_steps(dask_worker):
    ext = dask_worker.extensions.get("tensorvm")
    return sorted(str(k) for k in ext.data_plane.running) if ext is not None else []


def _on_ps(cluster, fn):
    addr = cluster.worker("ps-0")
    return cluster.client.run(fn, workers=[addr])[addr]


# ---- a lost client ----------------------------------------------------------------------------

_CLIENT = textwrap.dedent("""
    import sys, time
    import numpy as np
    import tensorvm as tv
    from tensorvm.framework.op_def_library import apply_op
    g = tv.Graph()
    with g.as_default(), tv.device("/job:ps/task:0"):
        local = tv.placeholder(tv.int64, [], name="local_step")
        wait = apply_op("SyncTokenWait", [local], {"gate": sys.argv[2]}).outputs[0]
    sess = tv.Session(sys.argv[1], graph=g, cluster={"ps": 1, "worker": 2}, verbose=False)
    direct = tv.RunOptions(data_plane="direct")
    print("took", int(sess.run(wait, {local: np.int64(4)}, options=direct)), flush=True)
    sess.run(wait, {local: np.int64(5)}, options=direct)  # no token left: waits
    print("not reached", flush=True)
""")


def test_a_killed_clients_waiting_step_is_cancelled_and_takes_no_token(cluster):
    gate = "test/lost_client_gate"
    g, local, step, wait, release = _gate_graph(gate)
    sess = cluster.session(graph=g)
    sess.run(release, {step: np.int64(5)}, options=DIRECT)  # step 5 current, one token
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] +
                                        [env.get("PYTHONPATH", "")])
    proc = subprocess.Popen([sys.executable, "-c", _CLIENT, cluster.address, gate],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()  # the client took step 5's token: its next step waits
        assert line.split() == ["took", "5"], (line, proc.stderr.read() if proc.poll() else "")
        deadline = time.monotonic() + 30
        while _on_ps(cluster, _token_waits) < 1:  # the dead-to-be step is in the token wait
            assert time.monotonic() < deadline, "the client's step never waited for a token"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()
    killed = time.monotonic()
    while _on_ps(cluster, _token_waits) or _on_ps(cluster, _running_steps):
        assert time.monotonic() - killed < 5, (
            "the killed client's step still runs on the PS worker: "
            f"{_on_ps(cluster, _token_waits)} token waits, steps {_on_ps(cluster, _running_steps)}")
        time.sleep(0.05)
    # A new session: step 6's one token goes to its wait, not to the dead client's.
    sess2 = cluster.session(graph=g)
    sess2.run(release, {step: np.int64(6)}, options=DIRECT)
    got = sess2.run(wait, {local: np.int64(5)},
                    options=tv.RunOptions(data_plane="direct", timeout_in_ms=10_000))
    assert int(got) == 6
    # and sync training on the cluster works (its steps on the direct plane)
    _sync_training_works(cluster)


def _sync_training_works(cluster):
    g = tv.Graph()
    with g.as_default(), tv.device(tv.train.replica_device_setter(
            ps_tasks=1, worker_device="/job:worker/task:0")):
        gs = tv.train.get_or_create_global_step()
        w = tv.Variable(np.zeros(2, np.float32), name="w_after_lost_client")
        loss = tv.reduce_sum((w - 1.0) ** 2)
        opt = tv.train.SyncReplicasOptimizer(tv.train.GradientDescentOptimizer(0.1), 1, 1)
        train = opt.minimize(loss, global_step=gs)
        init = tv.global_variables_initializer()
    sess = cluster.session(graph=g)
    sess.run(init)
    sess.run(opt.chief_init_op)
    sess.run(opt.local_step_init_op)
    chief = opt.get_chief_queue_runner().start(sess)
    try:
        for _ in range(3):
            sess.run(train, options=tv.RunOptions(timeout_in_ms=30_000))
    finally:
        chief.stop(sess)
    assert int(sess.run(gs)) == 3
    np.testing.assert_allclose(sess.run(w), 1.0 - 0.8 ** 3, rtol=1e-6)


# ---- more waiting steps than step threads -----------------------------------------------------

def _set_step_threads(n):
    def fn(dask_worker):
        from concurrent.futures import ThreadPoolExecutor

        import tensorvm.runtime.direct.data_plane as dp
        plane = dask_worker.extensions["tensorvm"].data_plane
        old = dp.STEP_THREADS
        dp.STEP_THREADS = n
        plane.pool = ThreadPoolExecutor(n, thread_name_prefix="tensorvm-step")
        return old
    return fn


def _set_waiting_steps(n):
    def fn(dask_worker):
        import tensorvm.runtime.direct.data_plane as dp
        old = getattr(dp, "WAITING_STEPS", None)
        dp.WAITING_STEPS = n
        return old
    return fn


def _waits_in_threads(cluster, gate, n, local_step, timeout_ms):
    """``n`` threads, each with its own session, running a token wait at ``local_step``."""
    results: list = [None] * n

    def run(i):
        g, local, _, wait, _ = _gate_graph(gate)
        s = cluster.session(graph=g)
        try:
            results[i] = int(s.run(wait, {local: np.int64(local_step)},
                                   options=tv.RunOptions(data_plane="direct",
                                                         timeout_in_ms=timeout_ms)))
        except Exception as exc:  # noqa: BLE001 - checked by the caller
            results[i] = exc
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads, results


def test_more_waiting_steps_than_step_threads_still_see_the_release(cluster):
    gate = "test/many_waiters_gate"
    n = 5
    gr, step, release_none = _release_graph(gate, 0)
    rsess = cluster.session(graph=gr)
    rsess.run(release_none, {step: np.int64(5)}, options=DIRECT)  # the gate exists, no token
    old = _on_ps(cluster, _set_step_threads(2))
    try:
        threads, results = _waits_in_threads(cluster, gate, n, 5, 40_000)
        deadline = time.monotonic() + 20
        while _on_ps(cluster, _token_waits) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _on_ps(cluster, _token_waits) == n, "waiting steps are queued behind each other"
        gr2, step2, release = _release_graph(gate, n)
        s2 = cluster.session(graph=gr2)
        got = s2.run(release, {step2: np.int64(6)},
                     options=tv.RunOptions(data_plane="direct", timeout_in_ms=10_000))
        assert int(got) == 6
        for t in threads:
            t.join(60)
        assert results == [6] * n
    finally:
        _on_ps(cluster, _set_step_threads(old))


def test_waiting_steps_past_the_cap_fail_with_resource_exhausted(cluster):
    gate = "test/capped_gate"
    gr, step, release_none = _release_graph(gate, 0)
    rsess = cluster.session(graph=gr)
    rsess.run(release_none, {step: np.int64(5)}, options=DIRECT)
    old = _on_ps(cluster, _set_waiting_steps(2))
    try:
        threads, results = _waits_in_threads(cluster, gate, 2, 5, 40_000)
        deadline = time.monotonic() + 20
        while _on_ps(cluster, _token_waits) < 2:
            assert time.monotonic() < deadline, "the two waits never started"
            time.sleep(0.05)
        g, local, _, wait, _ = _gate_graph(gate)
        s3 = cluster.session(graph=g)
        with pytest.raises(tv.errors.ResourceExhaustedError,
                           match=r"/job:ps/\S+: 2 stages that wait for other steps \(token waits, "
                                 r"accumulators\) run on this worker already, the most allowed "
                                 r"\(tensorvm\.runtime\.direct\.data_plane\.WAITING_STEPS = 2\); "
                                 r"step \S+ was not started$"):
            s3.run(wait, {local: np.int64(5)},
                   options=tv.RunOptions(data_plane="direct", timeout_in_ms=10_000))
        # A wait whose input comes from another device runs stage by stage: the stage is named.
        g4 = tv.Graph()
        with g4.as_default():
            with tv.device("/job:worker/task:0"):
                local4 = tv.placeholder(tv.int64, [], name="local_step")
                after = local4 + 0
            with tv.device("/job:ps/task:0"):
                wait4 = apply_op("SyncTokenWait", [after], {"gate": gate}).outputs[0]
        s4 = cluster.session(graph=g4)
        with pytest.raises(tv.errors.ResourceExhaustedError,
                           match=r"/job:ps/\S+: 2 stages that wait for other steps .*"
                                 r"WAITING_STEPS = 2\); stage \S+ of step \S+ was not started$"):
            s4.run(wait4, {local4: np.int64(5)},
                   options=tv.RunOptions(data_plane="direct", timeout_in_ms=10_000))
        gr2, step2, release = _release_graph(gate, 2)
        s2 = cluster.session(graph=gr2)
        s2.run(release, {step2: np.int64(6)}, options=DIRECT)
        for t in threads:
            t.join(60)
        assert results == [6, 6]
    finally:
        _on_ps(cluster, _set_waiting_steps(old if old is not None else 1024))


# ---- a session closed while one of its steps runs in another thread --------------------------

@pytest.mark.parametrize("plane", ["direct", "dask"])
def test_closing_a_session_cancels_its_running_steps(cluster, plane):
    """TF: ``Session.close()`` cancels the session's pending runs. A step blocked on an empty
    queue (the dequeue of an input pipeline) in another thread ends at once with
    CancelledError saying the session closed (it hung forever; on the Dask plane a running
    step said UnavailableError 'plan … is not registered'), and takes nothing from the queue:
    the next element goes to the next session's dequeue."""
    g = tv.Graph()
    with g.as_default(), tv.device("/job:ps/task:0"):
        q = tv.FIFOQueue(4, [tv.float32], shapes=[[]], name=f"closed_mid_step_{plane}",
                         shared_name=f"closed_mid_step_{plane}")
        deq = q.dequeue()
        enq = q.enqueue([tv.constant(7.0)])
    s = cluster.session(graph=g, config=tv.ConfigProto(data_plane=plane))
    box = {}

    def run():
        try:
            box["value"] = s.run(deq)
        except BaseException as e:  # noqa: BLE001 - checked below
            box["error"] = e
    th = threading.Thread(target=run)
    th.start()
    time.sleep(1.0)  # the dequeue waits on the PS
    assert th.is_alive()
    t0 = time.monotonic()
    s.close()
    th.join(10)
    assert not th.is_alive(), "the step of a closed session still waits"
    assert time.monotonic() - t0 < 5
    err = box.get("error")
    assert isinstance(err, tv.errors.CancelledError), repr(box)
    assert "closed" in str(err), str(err)
    s2 = cluster.session(graph=g)
    s2.run(enq)
    assert s2.run(deq, options=tv.RunOptions(timeout_in_ms=10_000)) == 7.0
