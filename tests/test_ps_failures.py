"""Failure modes of synchronous PS training, in process (no cluster): a replica's step re-run
after its gradient was accepted, a chief recreated while its loop waits, a chief restarted at
the step its workers wait on, and sparse gradients aggregated against NumPy."""
import threading
import time

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.train import sync_state


def test_accumulator_counts_a_replica_once_per_step():
    acc = sync_state.GradientAccumulator(num_required=2, kinds=("dense",))
    acc.set_step(0)
    one, three = [np.array([1.0])], [np.array([3.0])]
    assert acc.apply(0, one, "w0") == "accepted"
    assert acc.apply(0, [np.array([100.0])], "w0") == "duplicate"  # its step re-run
    assert acc.apply(0, three, "w1") == "accepted"
    assert acc.take(0)[0].tolist() == [2.0] and acc.dropped["duplicate"] == 1
    assert acc.apply(1, one, "w0") == "accepted"  # a new step: counts again


def test_a_take_from_a_replaced_chief_loop_aborts_rather_than_resetting_the_step():
    acc = sync_state.GradientAccumulator(num_required=1, kinds=("dense",))
    acc.set_step(5)
    assert acc.take(5) is None
    since = acc.generation  # the old loop's take waits from here
    acc.set_step(3)  # the restarted chief (restored step 3)
    with pytest.raises(tv.errors.AbortedError, match="take of step 5 waited.*replaced"):
        acc.take(5, since)
    assert acc.step == 3  # the new chief's step stands


def test_a_restart_at_a_waiting_workers_own_step_lets_it_go():
    gate = sync_state.TokenGate()
    gate.release(7, tokens=2)
    assert gate.try_take(7) is None  # applied for 7: waits for 8
    since = gate.restarts
    gate.restart(7, tokens=2)  # the chief restored step 7: the accumulator dropped its gradient
    assert gate.try_take(7, since) == 7  # waiting before the restart: goes on at 7
    assert gate.try_take(7, gate.restarts) is None  # arrived after it: waits for 8


def _two_replicas(n_required=2, sparse=False):
    """One graph holding two replicas' train ops (as two between-graph replicas would: the
    same accumulators and gate by name), their losses and the optimizers."""
    g = tv.Graph()
    rng = np.random.default_rng(0)
    data = [rng.normal(size=(4, 3)).astype(np.float32) for _ in range(2)]
    ids = [np.array([0, 2, 2, 5]), np.array([2, 5, 5, 1])]
    with g.as_default():
        with tv.device("/job:ps/task:0"):
            w = tv.Variable(np.ones((6, 3), np.float32) if sparse else
                            np.ones(3, np.float32), name="w")
            gs = tv.train.get_or_create_global_step()
        ops = []
        for k in range(2):
            with tv.device(f"/job:worker/task:{k}"):
                if sparse:
                    rows = tv.gather(w, ids[k])
                    loss = tv.reduce_sum(rows * tv.constant(data[k]))
                else:
                    loss = tv.reduce_sum(tv.reduce_sum(tv.constant(data[k]) * w, axis=1) ** 2)
                opt = tv.train.SyncReplicasOptimizer(tv.train.GradientDescentOptimizer(0.1),
                                                     replicas_to_aggregate=n_required,
                                                     total_num_replicas=2)
                ops.append((opt.minimize(loss, global_step=gs), opt))
        init = tv.global_variables_initializer()
        local = tv.local_variables_initializer()
    return g, w, gs, ops, init, local, data, ids


def _start(sess, g, opt, init, local):
    sess.run(init)
    sess.run(local)
    hook = opt.make_session_run_hook(True)
    hook.after_create_session(sess, None)
    return hook


def _run_in_thread(sess, op):
    out = {}

    def go():
        try:
            out["v"] = sess.run(op)
        except Exception as e:  # noqa: BLE001 - looked at by the test
            out["e"] = e
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, out


def _dense_grad(x, w):
    return 2.0 * x.T @ (x @ w)


def test_a_replicas_step_rerun_after_its_gradient_was_accepted_is_not_averaged_twice():
    """Replica 0's worker is lost after its gradient was accepted; its step is run again after
    recovery (a new batch). Its first gradient counts; the second is a duplicate; the step
    averages replica 0's and replica 1's gradients (was: replica 0's twice)."""
    g, w, gs, ops, init, local, data, _ = _two_replicas()
    (train0, opt0), (train1, opt1) = ops
    accumulate0 = next(op for op in g.get_operations() if op.type == "SyncAccApply")
    sess = tv.Session(graph=g)
    hook = _start(sess, g, opt0, init, local)
    sess.run(opt1.local_step_init_op)
    try:
        assert int(sess.run(accumulate0.outputs[0])) == 0  # accepted; then its worker is lost
        t0, out0 = _run_in_thread(sess, train0)  # the step run again after the recovery
        time.sleep(0.3)
        t1, out1 = _run_in_thread(sess, train1)
        for t in (t0, t1):
            t.join(20)
        assert not t0.is_alive() and not t1.is_alive()
        assert "e" not in out0 and "e" not in out1, (out0, out1)
        w0 = np.ones(3, np.float32)
        want = w0 - 0.1 * (_dense_grad(data[0], w0) + _dense_grad(data[1], w0)) / 2
        np.testing.assert_allclose(sess.run(w), want, rtol=1e-5)
        assert int(sess.run(gs)) == 1
    finally:
        hook.end(sess)
        sess.close()


def test_a_chief_restarted_at_the_step_its_workers_wait_on_lets_them_go():
    """The chief's session is recreated at the step a worker has applied its gradient for and
    waits on (a checkpoint of that very step): the reset drops that gradient, so the worker
    must be let go to compute it again (was: it waited for ever, and the step with it)."""
    g, w, gs, ops, init, local, data, _ = _two_replicas()
    (train0, opt0), (train1, opt1) = ops
    sess = tv.Session(graph=g)
    hook = _start(sess, g, opt0, init, local)
    sess.run(opt1.local_step_init_op)
    try:
        t1, out1 = _run_in_thread(sess, train1)  # applied for step 0; waits for its token
        time.sleep(0.3)
        t = time.monotonic()
        hook.after_create_session(sess, None)  # the chief recreated (restored step 0)
        assert time.monotonic() - t < 5
        t1.join(10)
        assert not t1.is_alive(), "the waiting worker was not let go"
        assert "e" not in out1, out1
        # both replicas then make step 0 together, as one
        ta, outa = _run_in_thread(sess, train0)
        tb, outb = _run_in_thread(sess, train1)
        for th in (ta, tb):
            th.join(20)
        assert not ta.is_alive() and not tb.is_alive()
        assert "e" not in outa and "e" not in outb, (outa, outb)
        w0 = np.ones(3, np.float32)
        want = w0 - 0.1 * (_dense_grad(data[0], w0) + _dense_grad(data[1], w0)) / 2
        np.testing.assert_allclose(sess.run(w), want, rtol=1e-5)
        assert int(sess.run(gs)) == 1
    finally:
        hook.end(sess)
        sess.close()


def test_sparse_gradients_aggregated_in_sync_mode_equal_the_dense_average():
    """Two replicas' embedding gradients (IndexedSlices with repeated rows, rows shared
    between the replicas) are concatenated, summed per row and averaged on the PS: the update
    equals NumPy's dense average of the two dense gradients (TF's SparseConditionalAccumulator
    divides each row by how many gradients touched it instead)."""
    g, w, gs, ops, init, local, data, ids = _two_replicas(sparse=True)
    (train0, opt0), (train1, opt1) = ops
    sess = tv.Session(graph=g)
    hook = _start(sess, g, opt0, init, local)
    sess.run(opt1.local_step_init_op)
    try:
        ths = [_run_in_thread(sess, op) for op in (train0, train1)]
        for th, out in ths:
            th.join(20)
            assert not th.is_alive() and "e" not in out, out
        dense = np.zeros((2, 6, 3), np.float32)
        for k in range(2):
            np.add.at(dense[k], ids[k], data[k])  # d loss / d w for loss = sum(w[ids] * x)
        want = np.ones((6, 3), np.float32) - 0.1 * dense.mean(axis=0)
        np.testing.assert_allclose(sess.run(w), want, rtol=1e-6)
        assert int(sess.run(gs)) == 1
    finally:
        hook.end(sess)
        sess.close()


def test_a_chief_step_waiting_long_for_gradients_is_logged(monkeypatch, caplog):
    """No ClusterSpec to check replicas_to_aggregate against (in process, an existing
    cluster): a chief step that waits STALL_WARNING_S for gradients says so, once."""
    import logging

    from tensorvm.train import sync_replicas
    monkeypatch.setattr(sync_replicas, "STALL_WARNING_S", 0.3)
    g, _w, _gs, ops, init, local, _data, _ = _two_replicas()
    (_train0, opt0), _ = ops
    sess = tv.Session(graph=g)
    with caplog.at_level(logging.WARNING, logger="tensorvm"):
        hook = _start(sess, g, opt0, init, local)  # no replica runs: the take waits
        try:
            deadline = time.monotonic() + 10
            while not any("waited" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "no warning"
                time.sleep(0.05)
            time.sleep(0.8)
        finally:
            hook.end(sess)
            sess.close()
    warned = [r.getMessage() for r in caplog.records if "waited" in r.getMessage()]
    assert len(warned) == 1, warned
    assert "for the 2 gradients of one step; is every replica running its train_op" in warned[0]


def test_a_take_completing_after_a_restore_does_not_apply_its_old_gradients():
    """The chief's session is recreated while its loop waits for step 0's gradients; the
    restore sets the global step to 3 (a checkpoint) before they arrive. The old loop's take
    must give up rather than apply gradients of step 0 to the restored variables (it did:
    w moved and the global step went to 4)."""
    g, w, gs, ops, init, local, _data, _ = _two_replicas()
    (train0, opt0), (train1, opt1) = ops
    with g.as_default():
        restore_gs = gs.assign(np.int64(3))
    sess = tv.Session(graph=g)
    hook = _start(sess, g, opt0, init, local)  # its loop waits in the take of step 0
    sess.run(opt1.local_step_init_op)
    try:
        time.sleep(0.3)
        sess.run(restore_gs)  # what Saver.restore does to the global step
        threads = [_run_in_thread(sess, op) for op in (train0, train1)]  # step-0 gradients
        deadline = time.monotonic() + 10
        while hook._runner._thread.is_alive():
            assert time.monotonic() < deadline, "the old take did not give up"
            time.sleep(0.05)
        assert hook._runner.error is None  # replaced, not failed
        np.testing.assert_array_equal(sess.run(w), np.ones(3, np.float32))
        assert int(sess.run(gs)) == 3
    finally:
        hook.end(sess)
        for th, _out in threads:
            th.join(10)
        sess.close()


def test_run_replicas_refuses_more_gradients_a_step_than_workers_before_starting_a_cluster():
    from tensorvm.train.replicas import run_replicas
    t = time.monotonic()
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"replicas_to_aggregate=3 but the cluster has 2 worker task\(s\): "
                             r"a step needs between 1 and 2 gradients"):
        run_replicas(lambda ctx: {}, {"ps": 1, "worker": 2}, sync=True,
                     replicas_to_aggregate=3)
    assert time.monotonic() - t < 2  # refused before any LocalCluster was started
