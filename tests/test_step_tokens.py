"""Step tokens, in process: each of the K steps of ``run(..., steps=K)`` claims its own token
(``token#k``, :func:`tensorvm.ops.state.ledger.per_step_token`), for the exactly-once guard and for
a :class:`SyncReplicasOptimizer` whose gradients carry tokens (``step_tokens=True``: what
``run_replicas(sync=True)`` builds on the coordinator).

Failures first: before per-step tokens, the K steps of one run shared the fed token, so the
guard applied only the first (``test_each_of_k_steps_applies_once``) and the coordinator left
K-step runs unguarded; before token-tagged gradients, a sync closure run again elsewhere after
its gradient arrived was accepted a second time (or, tagged by worker, made its worker wait for
a step that needed it: ``test_a_sync_twin_adds_nothing_and_does_not_wait``).
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import tensorvm as tv
from tensorvm.train.sync_replicas import SyncReplicasOptimizer


def _guarded(lr=1.0):
    g = tv.Graph()
    with g.as_default():
        w = tv.Variable(np.float32(0.0), name="w")
        gs = tv.train.get_or_create_global_step()
        with tv.train.exactly_once() as once:
            train = tv.train.GradientDescentOptimizer(lr).minimize(-w, global_step=gs)
        init = tv.global_variables_initializer()
    return g, w, gs, once, train, init


def test_each_of_k_steps_applies_once():
    """One run of K=3 steps fed token ``a``: 3 updates (w moves by lr each, d(-w)/dw = -1);
    the same run again (a twin): all 3 dropped; a twin of 5 steps applies only the 2 its
    first run did not have (tokens a#3, a#4)."""
    g, w, gs, once, train, init = _guarded()
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(train, {once.token: b"a"}, steps=3)
        assert s.run([w, gs]) == [3.0, 3]
        s.run(train, {once.token: b"a"}, steps=3)
        assert s.run([w, gs]) == [3.0, 3]
        assert {k: int(v) for k, v in s.run(once.counters()).items()} == \
            {"applied": 3, "dropped": 3}
        s.run(train, {once.token: b"a"}, steps=5)
        assert s.run([w, gs]) == [5.0, 5]
        assert {k: int(v) for k, v in s.run(once.counters()).items()} == \
            {"applied": 5, "dropped": 6}
        s.run(train, steps=4)  # no token (b""): every step applies
        assert s.run([w, gs]) == [9.0, 9]


def test_per_step_token_counts_the_runs_of_an_op_in_one_step():
    """``token#k``: k counts the runs of one op in one step id (the K steps of a run); a
    new step id (a new ``session.run``: a twin) counts from 0 again; ``b""`` stays none."""
    from tensorvm.ops.state.ledger import SEQ_STEPS, per_step_token
    from tensorvm.vm.resources import KernelContext, ResourceMgr
    rm = ResourceMgr("/cpu:0")

    def ctx(op, step):
        return KernelContext(rm, op, step, "/cpu:0")
    assert [per_step_token(ctx("claim", "s.1"), b"t") for _ in range(3)] == \
        [b"t#0", b"t#1", b"t#2"]
    assert per_step_token(ctx("claim", "s.2"), b"t") == b"t#0"  # the twin's run
    assert per_step_token(ctx("other", "s.1"), b"t") == b"t#0"  # each op counts its own
    assert per_step_token(ctx("claim", "s.1"), b"") == b""
    for i in range(SEQ_STEPS):  # the oldest step ids are forgotten
        per_step_token(ctx("claim", f"x.{i}"), b"t")
    assert per_step_token(ctx("claim", "s.1"), b"t") == b"t#0"


def _sync(n_required, total):
    g = tv.Graph()
    with g.as_default():
        w = tv.Variable(np.float32(0.0), name="w")
        gs = tv.train.get_or_create_global_step()
        opt = SyncReplicasOptimizer(tv.train.GradientDescentOptimizer(1.0),
                                    replicas_to_aggregate=n_required, total_num_replicas=total)
        opt.step_tokens = True
        train = opt.minimize(-w, global_step=gs)  # every gradient -1: w += 1 a step
        init = tv.global_variables_initializer()
        local = tv.local_variables_initializer()
    return g, w, gs, opt, train, init, local


def _counts(s, opt):
    from tensorvm.train.sync_replicas import COUNTS
    return dict(zip(COUNTS, (int(v) for v in s.run(opt.counts))))


def test_a_sync_twin_adds_nothing_and_does_not_wait():
    """Two gradients a step. Closure ``a`` applies its gradient and waits for the step (in a
    thread); its twin (the same token, as a closure run again on another worker) is dropped
    and returns at once, without a token: the step still waits for a second *closure*, ``b``,
    and then applies once, the average of a's and b's gradients."""
    g, w, gs, opt, train, init, local = _sync(2, 2)
    with tv.Session(graph=g) as s:
        s.run([init, local])
        s.run(opt.chief_init_op)
        s.run(opt.local_step_init_op)
        chief = opt.get_chief_queue_runner().start(s)
        first = threading.Thread(target=s.run, args=(train, {opt.step_token: b"a"}))
        first.start()
        try:
            while _counts(s, opt)["accepted"] < 1:  # a's gradient is in
                first.join(0.01)
            s.run(train, {opt.step_token: b"a"})  # the twin: returns at once
            assert first.is_alive()  # a still waits: the step has one gradient of two
            assert int(s.run(gs)) == 0
            s.run(train, {opt.step_token: b"b"})
            first.join(60)
            assert not first.is_alive()
            assert s.run([w, gs]) == [1.0, 1]
            assert _counts(s, opt) == {"accepted": 2, "taken": 1, "stale": 0, "surplus": 0,
                                       "ahead": 0, "duplicate": 1}
        finally:
            chief.stop(s)
            first.join(10)


def test_sync_k_steps_each_with_its_own_token():
    """One gradient a step, 3 steps a run fed one token: 3 global steps; the twin of that run
    adds none (and waits for none)."""
    g, w, gs, opt, train, init, local = _sync(1, 1)
    with tv.Session(graph=g) as s:
        s.run([init, local])
        s.run(opt.chief_init_op)
        s.run(opt.local_step_init_op)
        chief = opt.get_chief_queue_runner().start(s)
        try:
            s.run(train, {opt.step_token: b"k"}, steps=3)
            assert s.run([w, gs]) == [3.0, 3]
            s.run(train, {opt.step_token: b"k"}, steps=3)
            assert s.run([w, gs]) == [3.0, 3]
            s.run(train, {opt.step_token: b"k2"}, steps=2)
            assert s.run([w, gs]) == [5.0, 5]
            assert _counts(s, opt) == {"accepted": 5, "taken": 5, "stale": 0, "surplus": 0,
                                       "ahead": 0, "duplicate": 3}
        finally:
            chief.stop(s)
