"""TF 1.x's session creators, SingularMonitoredSession, SessionManager, count_up_to /
limit_epochs, report_uninitialized_variables, global_step helpers and LooperThread."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import tensorvm as tv


@pytest.fixture
def g():
    with tv.Graph().as_default() as graph:
        yield graph


def _model():
    w = tv.Variable(np.float32(4.0), name="w")
    gs = tv.train.get_or_create_global_step()
    train = tv.train.GradientDescentOptimizer(0.25).minimize(w * w, global_step=gs)
    return w, gs, train


def test_monitored_session_with_a_chief_session_creator_restores(g, tmp_path):
    w, gs, train = _model()
    creator = tv.train.ChiefSessionCreator(checkpoint_dir=str(tmp_path))
    with tv.train.MonitoredSession(session_creator=creator,
                                   hooks=[tv.train.StopAtStepHook(last_step=2)]) as sess:
        while not sess.should_stop():
            sess.run(train)
        tv.train.Saver().save(sess.raw_session(), str(tmp_path / "model.ckpt"),
                              global_step=tv.train.global_step(sess.raw_session(), gs))
        assert tv.train.global_step(sess.raw_session(), gs) == 2
    with tv.train.SingularMonitoredSession(checkpoint_dir=str(tmp_path)) as sess:
        assert int(sess.run(gs)) == 2 and float(sess.run(w)) == pytest.approx(1.0)
    with tv.train.MonitoredSession(tv.train.ChiefSessionCreator(), [
            tv.train.StopAtStepHook(num_steps=1)]) as sess:  # TF's positional form
        assert float(sess.run(w)) == 4.0


def test_session_manager_prepare_and_wait(g, tmp_path):
    w, gs, train = _model()
    init = tv.global_variables_initializer()
    sm = tv.train.SessionManager()
    with pytest.raises(RuntimeError, match="no init_op or init_fn was given"):
        sm.prepare_session("")
    sess = sm.prepare_session("", init_op=init)
    sess.run(train)
    saver = tv.train.Saver()
    saver.save(sess, str(tmp_path / "m"), global_step=1)
    sess2, restored = sm.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
    assert restored and float(sess2.run(w)) == pytest.approx(2.0)
    sess3 = sm.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
    assert float(sess3.run(w)) == pytest.approx(2.0)  # restored, not initialised
    waiting = tv.train.SessionManager(recovery_wait_secs=0.01)
    with pytest.raises(tv.errors.DeadlineExceededError, match="not ready after waiting"):
        waiting.wait_for_session("", max_wait_secs=0.05)


def test_count_up_to_limit_epochs_and_uninitialized_report(g):
    c = tv.Variable(np.int64(0))
    step = c.count_up_to(2)
    limited = tv.train.limit_epochs(tv.constant([1, 2]), num_epochs=2)
    missing = tv.report_uninitialized_variables()
    with tv.Session() as s:
        assert sorted(s.run(missing).tolist()) == sorted(
            v.op.name for v in tv.global_variables() + tv.local_variables())
        s.run(c.initializer)
        s.run(tv.local_variables_initializer())
        assert [int(s.run(step)), int(s.run(step))] == [0, 1]
        with pytest.raises(tv.errors.OutOfRangeError, match="Reached limit of 2"):
            s.run(step)
        assert s.run(limited).tolist() == [1, 2] and s.run(limited).tolist() == [1, 2]
        with pytest.raises(tv.errors.OutOfRangeError):
            s.run(limited)
        assert s.run(c) == 2
    with pytest.raises(tv.errors.InvalidArgumentError, match="must be int32 or int64"):
        tv.Variable(1.0).count_up_to(3)
    with pytest.raises(ValueError, match="num_epochs must be > 0"):
        tv.train.limit_epochs(tv.constant(1), 0)


def test_global_step_checks_and_looper_thread(g):
    tv.train.assert_global_step(tv.train.get_or_create_global_step())
    with pytest.raises(TypeError, match="does not have integer type"):
        tv.train.assert_global_step(tv.Variable(1.0))
    with pytest.raises(TypeError, match="is not scalar"):
        tv.train.assert_global_step(tv.Variable(np.zeros(2, np.int64)))
    coord = tv.train.Coordinator()
    calls = []
    done = threading.Event()

    def tick():
        calls.append(1)
        if len(calls) == 3:
            done.set()
            coord.request_stop()
    t = tv.train.LooperThread.loop(coord, 0.01, tick)
    assert done.wait(5)
    coord.join([t], stop_grace_period_secs=5)
    assert len(calls) == 3
