"""Queues: TF 1.x semantics case by case (in process), then across devices and blocking on a
LocalCluster of worker processes."""
import doctest
import threading
import time

import numpy as np
import pytest

import tensorvm as tv
from tensorvm.runtime.session import local_resources

TV_CLUSTER = {"ps": 1, "worker": 1}
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state



def run_in_thread(fn):
    """Start ``fn`` in a thread; return (thread, box) where box gets 'value' or 'error'."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported to the test
            box["error"] = e
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def queue_state(sess, q):
    """White box: the in-process session's state of queue ``q`` (None until first used)."""
    dev = sess.plan(q.size()).devices[0]
    try:
        return local_resources(sess).for_device(dev).lookup(q._spec["container"],
                                                            "queue:" + q._spec["name"])
    except tv.errors.NotFoundError:
        return None


def wait_blocked(sess, q, t, n=1):
    """Wait until ``n`` ops wait on ``q`` (so the test synchronises on state, not on time)."""
    deadline = time.monotonic() + 30
    while getattr(queue_state(sess, q), "waiting", 0) < n:
        assert time.monotonic() < deadline, "the op never started waiting"
        time.sleep(0.01)
    assert t.is_alive()


def test_docstring_example():
    import tensorvm.ops.state.data_flow_ops as mod
    assert doctest.testmod(mod).failed == 0


# ---- FIFO ------------------------------------------------------------------------------------

def test_fifo_order_and_static_shapes(g):
    q = tv.FIFOQueue(10, [tv.int32, tv.string], shapes=[[2], []])
    enq = q.enqueue_many([[[1, 2], [3, 4], [5, 6]], ["a", "b", "c"]])
    one = q.dequeue()
    two = q.dequeue_many(2)
    assert one[0].shape == [2] and one[1].shape == []
    assert two[0].shape == [2, 2] and two[1].shape == [2]
    assert q.dequeue_up_to(4)[0].shape == [None, 2]
    with tv.Session() as s:
        s.run(enq)
        assert int(s.run(q.size())) == 3
        a, b = s.run(one)
        assert a.tolist() == [1, 2] and b == "a"
        a, b = s.run(two)
        assert a.tolist() == [[3, 4], [5, 6]] and b.tolist() == ["b", "c"]
        assert int(s.run(q.size())) == 0


def test_dequeue_on_closed_empty_queue_is_out_of_range(g):
    q = tv.FIFOQueue(5, tv.float32, name="fifo")
    with tv.Session() as s:
        s.run(q.close())
        assert bool(s.run(q.is_closed()))
        with pytest.raises(tv.errors.OutOfRangeError,
                           match=r"FIFOQueue 'fifo' is closed and has insufficient elements "
                                 r"\(requested 1, current size 0\)"):
            s.run(q.dequeue())


def test_dequeue_many_on_closed_queue_names_counts_and_keeps_elements(g):
    q = tv.FIFOQueue(5, tv.int32, shapes=[[]], name="fifo")
    with tv.Session() as s:
        s.run(q.enqueue(7))
        s.run(q.close())
        with pytest.raises(tv.errors.OutOfRangeError,
                           match=r"is closed and has insufficient elements \(requested 2, "
                                 r"current size 1\)"):
            s.run(q.dequeue_many(2))
        assert int(s.run(q.size())) == 1  # the failed dequeue took nothing
        assert s.run(q.dequeue_up_to(2)).tolist() == [7]  # fewer, once closed
        with pytest.raises(tv.errors.OutOfRangeError, match=r"requested 2, current size 0"):
            s.run(q.dequeue_up_to(2))


def test_enqueue_after_close_is_cancelled(g):
    q = tv.FIFOQueue(5, tv.int32, name="fifo")
    with tv.Session() as s:
        s.run(q.close())
        with pytest.raises(tv.errors.CancelledError, match="FIFOQueue 'fifo' is closed"):
            s.run(q.enqueue(1))
        with pytest.raises(tv.errors.CancelledError):
            s.run(q.enqueue_many([[1, 2]]))


def test_enqueue_waits_while_full(g):
    q = tv.FIFOQueue(2, tv.int32, shapes=[[]])
    with tv.Session() as s:
        s.run(q.enqueue_many([[1, 2]]))
        op = q.enqueue(3)  # built here: the default graph is per thread, as in TF
        t, box = run_in_thread(lambda: s.run(op))
        wait_blocked(s, q, t)
        assert int(s.run(q.dequeue())) == 1
        t.join(10)
        assert "error" not in box
        assert s.run(q.dequeue_many(2)).tolist() == [2, 3]


def test_close_cancels_pending_enqueues(g):
    q = tv.FIFOQueue(1, tv.int32, shapes=[[]])
    with tv.Session() as s:
        s.run(q.enqueue(1))
        op = q.enqueue(2)  # built here: the default graph is per thread, as in TF
        t, box = run_in_thread(lambda: s.run(op))
        wait_blocked(s, q, t)
        s.run(q.close(cancel_pending_enqueues=True))
        t.join(10)
        assert isinstance(box.get("error"), tv.errors.CancelledError)
        assert s.run(q.dequeue_up_to(5)).tolist() == [1]


def test_close_without_cancel_lets_pending_enqueues_finish(g):
    q = tv.FIFOQueue(1, tv.int32, shapes=[[]])
    with tv.Session() as s:
        s.run(q.enqueue(1))
        op = q.enqueue(2)  # built here: the default graph is per thread, as in TF
        t, box = run_in_thread(lambda: s.run(op))
        wait_blocked(s, q, t)
        s.run(q.close())
        assert int(s.run(q.dequeue())) == 1
        t.join(10)
        assert "error" not in box
        assert int(s.run(q.dequeue())) == 2
        with pytest.raises(tv.errors.OutOfRangeError):
            s.run(q.dequeue())


def test_dequeue_waits_for_an_enqueue_from_another_step(g):
    q = tv.FIFOQueue(3, tv.float32, shapes=[[]])
    deq = q.dequeue()
    x = tv.placeholder(tv.float32, [])
    enq = q.enqueue(x)
    with tv.Session() as s:
        t, box = run_in_thread(lambda: s.run(deq))
        wait_blocked(s, q, t)
        s.run(enq, {x: 4.5})
        t.join(10)
        assert float(box["value"]) == 4.5


def test_dequeue_many_waits_and_close_wakes_it(g):
    q = tv.FIFOQueue(5, tv.int32, shapes=[[]])
    with tv.Session() as s:
        s.run(q.enqueue(1))
        op = q.dequeue_many(3)  # built here: the default graph is per thread, as in TF
        t, box = run_in_thread(lambda: s.run(op))
        wait_blocked(s, q, t)
        s.run(q.close())
        t.join(10)
        assert isinstance(box["error"], tv.errors.OutOfRangeError)
        assert "requested 3, current size 1" in str(box["error"])


def test_dequeue_many_larger_than_capacity_takes_partial_batches(g):
    q = tv.FIFOQueue(2, tv.int32, shapes=[[]])
    with tv.Session() as s:
        op = q.dequeue_many(5)  # built here: the default graph is per thread, as in TF
        t, box = run_in_thread(lambda: s.run(op))
        s.run(q.enqueue_many([np.arange(5, dtype=np.int32)]))
        t.join(10)
        assert box["value"].tolist() == [0, 1, 2, 3, 4]


def test_session_end_wakes_blocked_ops(g):
    q = tv.FIFOQueue(2, tv.int32, shapes=[[]])
    s = tv.Session()
    op = q.dequeue()  # built here: the default graph is per thread, as in TF
    t, box = run_in_thread(lambda: s.run(op))
    wait_blocked(s, q, t)
    s.close()
    t.join(10)
    # TF's Session.close cancels the pending runs: a blocked dequeue ends with CancelledError
    # (as on both cluster planes), its session's queues cleared after it (issue 24 item 3)
    assert isinstance(box["error"], tv.errors.CancelledError), box
    assert "session was closed" in str(box["error"])


def test_queue_ops_are_never_merged(g):
    q = tv.FIFOQueue(5, tv.int32, shapes=[[]])
    a, b = q.dequeue(), q.dequeue()
    with tv.Session() as s:
        s.run(q.enqueue_many([[1, 2]]))
        assert sorted(int(v) for v in s.run([a, b])) == [1, 2]


def test_names_enqueue_and_dequeue_dicts(g):
    q = tv.FIFOQueue(4, [tv.int32, tv.string], shapes=[[], []], names=["id", "text"])
    with tv.Session() as s:
        s.run(q.enqueue_many({"id": [1, 2], "text": ["x", "y"]}))
        out = s.run(q.dequeue_many(2))
        assert out["id"].tolist() == [1, 2] and out["text"].tolist() == ["x", "y"]
    with pytest.raises(tv.errors.InvalidArgumentError, match="names"):
        q.enqueue([1, "x"])


def test_shapes_and_dtypes_are_checked(g):
    q = tv.FIFOQueue(4, tv.int32, shapes=[[2]])
    with pytest.raises(tv.errors.InvalidArgumentError, match="Shape mismatch"):
        q.enqueue([[1, 2, 3]])
    with pytest.raises(tv.errors.InvalidArgumentError, match="1 components, got 3 values"):
        q.enqueue([1, 2, 3])
    with pytest.raises(tv.errors.InvalidArgumentError, match="dtype"):
        q.enqueue(tv.constant([1.0, 2.0]))
    x = tv.placeholder(tv.int32, [None])
    enq = q.enqueue(x)
    with tv.Session() as s, pytest.raises(tv.errors.InvalidArgumentError,
                                          match=r"Expected \[2\], got \[3\]"):
        s.run(enq, {x: [1, 2, 3]})


def test_shared_name_with_another_spec_is_rejected(g):
    a = tv.FIFOQueue(4, tv.int32, shared_name="shared")
    b = tv.FIFOQueue(4, tv.float32, shared_name="shared")
    with tv.Session() as s:
        s.run(a.enqueue(1))
        with pytest.raises(tv.errors.InvalidArgumentError, match="Shared queue 'shared'"):
            s.run(b.size())


# ---- RandomShuffleQueue ----------------------------------------------------------------------

def _shuffle_graph(seed):
    graph = tv.Graph()
    with graph.as_default():
        q = tv.RandomShuffleQueue(20, 0, tv.int32, shapes=[[]], seed=seed)
        enq = q.enqueue_many([np.arange(10, dtype=np.int32)])
        deq = q.dequeue_many(10)
    return graph, enq, deq


def test_random_shuffle_is_a_seeded_permutation():
    orders = []
    for _ in range(2):
        graph, enq, deq = _shuffle_graph(seed=7)
        with tv.Session(graph=graph) as s:
            s.run(enq)
            orders.append(s.run(deq).tolist())
    assert orders[0] == orders[1]
    assert sorted(orders[0]) == list(range(10)) and orders[0] != list(range(10))
    graph, enq, deq = _shuffle_graph(seed=8)
    with tv.Session(graph=graph) as s:
        s.run(enq)
        assert s.run(deq).tolist() != orders[0]


def test_random_shuffle_floor_holds_until_closed(g):
    q = tv.RandomShuffleQueue(10, 2, tv.int32, shapes=[[]], seed=1)
    with tv.Session() as s:
        s.run(q.enqueue_many([[1, 2, 3]]))
        first = int(s.run(q.dequeue()))  # 3 elements, floor 2: one may go
        op = q.dequeue_many(2)  # built here: the default graph is per thread, as in TF
        t, box = run_in_thread(lambda: s.run(op))
        wait_blocked(s, q, t)
        s.run(q.close())  # the floor no longer applies
        t.join(10)
        assert sorted([first] + box["value"].tolist()) == [1, 2, 3]
    with pytest.raises(tv.errors.InvalidArgumentError, match="min_after_dequeue"):
        tv.RandomShuffleQueue(3, 3, tv.int32)


# ---- PriorityQueue and PaddingFIFOQueue ------------------------------------------------------

def test_priority_queue_dequeues_smallest_priority_first(g):
    q = tv.PriorityQueue(10, [tv.string], shapes=[[]])
    with tv.Session() as s:
        s.run(q.enqueue_many([np.array([3, 1, 2], np.int64), ["c", "a", "b"]]))
        s.run(q.enqueue([np.int64(0), "z"]))
        prio, val = s.run(q.dequeue_many(4))
        assert prio.tolist() == [0, 1, 2, 3] and val.tolist() == ["z", "a", "b", "c"]


def test_padding_fifo_queue_pads_each_batch(g):
    q = tv.PaddingFIFOQueue(10, [tv.int32, tv.string], shapes=[[None], [None]])
    x = tv.placeholder(tv.int32, [None])
    y = tv.placeholder(tv.string, [None])
    enq = q.enqueue([x, y])
    deq = q.dequeue_many(2)
    assert deq[0].shape == [2, None]
    with tv.Session() as s:
        s.run(enq, {x: [1], y: ["a", "b"]})
        s.run(enq, {x: [1, 2, 3], y: ["c"]})
        a, b = s.run(deq)
        assert a.tolist() == [[1, 0, 0], [1, 2, 3]]
        assert b.tolist() == [["a", "b"], ["c", ""]]
    with pytest.raises(tv.errors.InvalidArgumentError, match="shapes"):
        tv.PaddingFIFOQueue(3, tv.int32, shapes=None)
    with pytest.raises(tv.errors.InvalidArgumentError, match="Shape mismatch"):
        q.enqueue([[[1]], ["a"]])


# ---- across devices and processes ------------------------------------------------------------

PS = "/job:ps/task:0"
WORKER = "/job:worker/task:0"


def wait_blocked_on_worker(cluster, name, n, task="ps-0"):
    """Wait until ``n`` ops wait on queue ``name`` in the worker process of ``task``."""
    addr = cluster.worker(task)

    def waiting(dask_worker):
        ext = dask_worker.extensions.get("tensorvm")
        mgrs = list(ext.resources._mgrs.values()) if ext is not None else []
        return sum(getattr(r, "waiting", 0) for m in mgrs for (_, key), r in list(m._res.items())
                   if key == "queue:" + name)
    deadline = time.monotonic() + 30
    while cluster.client.run(waiting, workers=[addr])[addr] < n:
        assert time.monotonic() < deadline, f"{n} ops never waited on {name!r}"
        time.sleep(0.02)


@pytest.mark.cluster
def test_producer_and_consumer_on_another_device(cluster):
    graph = tv.Graph()
    with graph.as_default():
        with tv.device(PS):
            q = tv.FIFOQueue(10, tv.float32, shapes=[[3]], name="q")
        with tv.device(WORKER):
            x = tv.placeholder(tv.float32, [3])
            enq = q.enqueue(x * 2.0)  # computed on the worker, enqueued on the PS
            total = tv.reduce_sum(q.dequeue())  # dequeued on the PS, summed on the worker
    s = cluster.session(graph)
    md = tv.RunMetadata()
    s.run(enq, {x: [1, 2, 3]}, options=tv.RunOptions(trace=True), run_metadata=md)
    assert {r["device"].split("/device")[0] for r in md.step_stats} == \
        {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"}
    where = {op: r["device"] for r in md.step_stats for op in r["ops"]}
    assert "/job:ps/" in where["q_enqueue"] and "/job:worker/" in where["Mul"]
    assert float(s.run(total)) == 12.0


@pytest.mark.cluster
def test_blocked_dequeues_release_their_worker_slots(cluster):
    # The PS worker has 2 threads; 3 dequeues wait there at once, and the enqueue that wakes
    # them still gets a slot because each waiting dequeue seceded from the pool.
    graph = tv.Graph()
    with graph.as_default(), tv.device(PS):
        q = tv.FIFOQueue(10, tv.int32, shapes=[[]], name="slots")
        deq = q.dequeue()
        enq = q.enqueue_many([[1, 2, 3]])
    s = cluster.session(graph)
    s.run(q.size())
    runs = [run_in_thread(lambda: s.run(deq)) for _ in range(3)]
    wait_blocked_on_worker(cluster, "slots", 3)  # more waiting ops than worker threads
    s.run(enq)
    for t, _ in runs:
        t.join(30)
    assert sorted(int(box["value"]) for _, box in runs) == [1, 2, 3]


@pytest.mark.cluster
def test_shared_name_between_two_sessions(cluster):
    g1, g2 = tv.Graph(), tv.Graph()
    with g1.as_default(), tv.device(PS):
        enq = tv.FIFOQueue(4, tv.string, shapes=[[]], shared_name="mailbox").enqueue("hello")
    with g2.as_default(), tv.device(PS):
        deq = tv.FIFOQueue(4, tv.string, shapes=[[]], shared_name="mailbox").dequeue()
    s1, s2 = cluster.session(g1), cluster.session(g2)
    t, box = run_in_thread(lambda: s2.run(deq))
    wait_blocked_on_worker(cluster, "mailbox", 1)
    s1.run(enq)
    t.join(30)
    assert box["value"] == "hello"


@pytest.mark.cluster
def test_a_timed_out_dequeue_does_not_take_later_elements(cluster):
    graph = tv.Graph()
    with graph.as_default(), tv.device(PS):
        q = tv.FIFOQueue(4, tv.int32, shapes=[[]], name="late")
        deq = q.dequeue()
        enq = q.enqueue(5)
    s = cluster.session(graph)
    with pytest.raises(tv.errors.DeadlineExceededError):
        s.run(deq, options=tv.RunOptions(timeout_in_ms=500))
    addr = cluster.worker("ps-0")

    def waiting(dask_worker):
        return sum(ts.state in ("executing", "long-running", "cancelled")
                   for ts in dask_worker.state.tasks.values())
    deadline = time.monotonic() + 30
    while cluster.client.run(waiting, workers=[addr])[addr]:  # the abandoned op gives up
        assert time.monotonic() < deadline
        time.sleep(0.05)
    s.run(enq)
    assert int(s.run(deq)) == 5


def test_a_timed_out_dequeue_in_process_does_not_take_later_elements():
    graph = tv.Graph()
    with graph.as_default():
        q = tv.FIFOQueue(4, tv.int32, shapes=[[]], name="late_local")
        deq = q.dequeue()
        enq = q.enqueue(7)
    with tv.Session(graph=graph) as s:
        with pytest.raises(tv.errors.DeadlineExceededError, match="within 300 ms"):
            s.run(deq, options=tv.RunOptions(timeout_in_ms=300))
        deadline = time.monotonic() + 10
        while local_resources(s).for_device(
                "/job:localhost/replica:0/task:0/device:CPU:0").lookup(
                    "", "queue:late_local").waiting:  # the abandoned dequeue gives up
            assert time.monotonic() < deadline
            time.sleep(0.02)
        s.run(enq)
        assert int(s.run(deq)) == 7
