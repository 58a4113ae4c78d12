"""``tv.train.exactly_once`` in process (issue 26 item 2): a step token's updates are applied at
most once per parameter-server device, twins are dropped and counted, and nothing a dropped twin
would have touched changes (variables, optimizer slots, Adam's beta powers, the global step).
Each test checks against NumPy after one update, and against the unguarded graph, which applies
the same double run twice."""
import threading
import time

import numpy as np
import pytest
import tensorvm as tv

X = np.array([[1.0, 2.0], [0.5, -1.0], [-2.0, 0.25]], np.float32)
Y = np.array([1.0, -0.5, 2.0], np.float32)
W0 = np.array([0.3, -0.2], np.float32)


def _grad(w):
    """d/dw of mean((X w - Y)^2)."""
    return (2.0 / len(Y)) * X.T @ (X @ w - Y)


def _model(opt, guard=True, devices=(None, None), capacity=None):
    """w (2 halves, each on ``devices[i]``) fit to X, Y; the global step on ``devices[0]``."""
    g = tv.Graph()
    with g.as_default():
        parts = []
        for i, dev in enumerate(devices):
            with tv.device(dev):
                parts.append(tv.Variable(W0[i:i + 1], name=f"w{i}"))
        with tv.device(devices[0]):
            gs = tv.train.get_or_create_global_step()
        w = tv.concat(parts, axis=0)
        loss = tv.reduce_mean((tv.reduce_sum(X * w, axis=1) - Y) ** 2)
        once = None
        if guard:
            kw = {} if capacity is None else {"capacity": capacity}
            with tv.train.exactly_once(**kw) as once:
                train = opt.minimize(loss, global_step=gs)
        else:
            train = opt.minimize(loss, global_step=gs)
        init = tv.global_variables_initializer()
    return g, parts, gs, train, once, init


def _w(s, parts):
    return np.concatenate([s.run(p) for p in parts])


def _counts(s, once):
    return {k: int(v) for k, v in s.run(once.counters()).items()}


# ---- one token, one update ----------------------------------------------------------------------

def test_a_step_rerun_with_its_token_after_its_result_was_lost_is_applied_once():
    """The failure-first case of the issue, simulated: a step's update reached the PS but its
    result never reached the client (discarded here); the client runs it again with the same
    token. Without the guard (second half) the same double run applies the update twice."""
    lr = 0.1
    one = W0 - lr * _grad(W0)
    g, parts, gs, train, once, init = _model(tv.train.GradientDescentOptimizer(lr))
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(train, {once.token: b"step-1"})  # its result is lost
        s.run(train, {once.token: b"step-1"})  # the re-run
        np.testing.assert_allclose(_w(s, parts), one, rtol=1e-6)
        assert int(s.run(gs)) == 1
        assert _counts(s, once) == {"applied": 1, "dropped": 1}
    g, parts, gs, train, _, init = _model(tv.train.GradientDescentOptimizer(lr), guard=False)
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(train)
        s.run(train)
        np.testing.assert_allclose(_w(s, parts), one - lr * _grad(one), rtol=1e-6)
        assert int(s.run(gs)) == 2


def test_distinct_tokens_are_each_applied_and_the_empty_token_always():
    lr = 0.1
    g, parts, gs, train, once, init = _model(tv.train.GradientDescentOptimizer(lr))
    want = W0.copy()
    with tv.Session(graph=g) as s:
        s.run(init)
        for feed in ({once.token: b"a"}, {once.token: b"b"}, {}, {once.token: b""}, None):
            s.run(train, feed)
            want = want - lr * _grad(want)
        np.testing.assert_allclose(_w(s, parts), want, rtol=1e-5)
        assert int(s.run(gs)) == 5
        assert _counts(s, once) == {"applied": 5, "dropped": 0}
        s.run(train, {once.token: "a"})  # a str token is the same token as its UTF-8 bytes
        assert _counts(s, once) == {"applied": 5, "dropped": 1}


def _momentum_numpy(steps, lr, mu):
    w, acc = W0.astype(np.float32), np.zeros(2, np.float32)
    for _ in range(steps):
        acc = mu * acc + _grad(w)
        w = w - lr * acc
    return w, acc


def _adam_numpy(steps, lr, b1=0.9, b2=0.999, eps=1e-8):
    """TF's Adam in float32, the variables' dtype (its constants rounded as the graph's)."""
    f = np.float32
    b1, b2, eps, lr = f(b1), f(b2), f(eps), f(lr)
    w, m, v = W0.astype(f), np.zeros(2, f), np.zeros(2, f)
    p1, p2 = b1, b2
    for _ in range(steps):
        gr = _grad(w).astype(f)
        lr_t = lr * np.sqrt(f(1) - p2) / (f(1) - p1)
        m = b1 * m + (f(1) - b1) * gr
        v = b2 * v + (f(1) - b2) * gr * gr
        w = w - lr_t * m / (np.sqrt(v) + eps)
        p1, p2 = p1 * b1, p2 * b2
    return w, m, v, p1, p2


@pytest.mark.parametrize("kind", ["momentum", "adam"])
def test_a_dropped_twin_leaves_slots_beta_powers_and_global_step_as_one_update_left_them(kind):
    """A twin changes no state at all: a zero gradient would still decay Momentum's
    accumulator and Adam's moments and powers."""
    lr = 0.05
    opt = (tv.train.MomentumOptimizer(lr, 0.9) if kind == "momentum"
           else tv.train.AdamOptimizer(lr))
    g, parts, gs, train, once, init = _model(opt)
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(train, {once.token: b"t1"})
        for _ in range(3):
            s.run(train, {once.token: b"t1"})
        w = _w(s, parts)
        if kind == "momentum":
            want_w, want_acc = _momentum_numpy(1, lr, 0.9)
            acc = np.concatenate([s.run(opt.get_slot(p, "Momentum")) for p in parts])
            np.testing.assert_allclose(acc, want_acc, rtol=1e-6)
        else:
            want_w, want_m, want_v, p1, p2 = _adam_numpy(1, lr)
            m = np.concatenate([s.run(opt.get_slot(p, "Adam")) for p in parts])
            v = np.concatenate([s.run(opt.get_slot(p, "Adam_1")) for p in parts])
            np.testing.assert_allclose(m, want_m, rtol=1e-5)
            np.testing.assert_allclose(v, want_v, rtol=1e-5)
            b1p, b2p = (s.run(x) for x in opt._powers[min(parts, key=lambda p: p.op.name)
                                                       .op.name])
            np.testing.assert_allclose([b1p, b2p], [p1, p2], rtol=1e-6)
        np.testing.assert_allclose(w, want_w, rtol=1e-5)
        assert int(s.run(gs)) == 1
        assert _counts(s, once) == {"applied": 1, "dropped": 3}
        s.run(train, {once.token: b"t2"})  # the next step goes on from one update
        want2 = (_momentum_numpy(2, lr, 0.9) if kind == "momentum" else _adam_numpy(2, lr))[0]
        np.testing.assert_allclose(_w(s, parts), want2, rtol=1e-5)


def test_sparse_updates_of_an_embedding_are_applied_once():
    """Adagrad's sparse path (scatter_add of the accumulator, a gather of it, scatter_sub of
    the rows): the ops between two guarded updates are gated with them."""
    g = tv.Graph()
    with g.as_default():
        emb0 = np.arange(8, dtype=np.float32).reshape(4, 2) / 10.0
        emb = tv.Variable(emb0, name="emb")
        ids = tv.constant([1, 3, 1])
        loss = tv.reduce_sum(tv.gather(emb, ids) ** 2)
        opt = tv.train.AdagradOptimizer(0.5, initial_accumulator_value=0.1)
        with tv.train.exactly_once() as once:
            train = opt.minimize(loss)
        init = tv.global_variables_initializer()
    gr = np.zeros_like(emb0)
    np.add.at(gr, [1, 3, 1], 2 * emb0[[1, 3, 1]])
    acc = 0.1 + np.where(gr != 0, gr * gr, 0.0)
    want = np.where(gr != 0, emb0 - 0.5 * gr / np.sqrt(acc), emb0)
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(train, {once.token: b"x"})
        s.run(train, {once.token: b"x"})
        np.testing.assert_allclose(s.run(emb), want, rtol=1e-6)
        np.testing.assert_allclose(s.run(opt.get_slot(emb, "Adagrad")), acc, rtol=1e-6)
        assert _counts(s, once) == {"applied": 1, "dropped": 1}


# ---- two parameter-server devices -----------------------------------------------------------

PS = ("/job:ps/task:0", "/job:ps/task:1")


def test_two_ps_devices_each_dedup_their_own_part():
    """A step whose update reached only ps:1 (simulated: only ps:1's update op run with the
    token) and then re-run whole: ps:1 drops its part, ps:0 applies its own and the global
    step's increment, so each part is applied once."""
    lr = 0.1
    opt = tv.train.GradientDescentOptimizer(lr)
    g, parts, gs, train, once, init = _model(opt, devices=PS)
    assert len(once.ledgers) == 3  # ps:0, ps:1, and the global step's increment on ps:0
    assert {t.device for t, _ in once.ledgers} == {p.device for p in parts}
    w1_update = next(op for op in g.get_operations() if op.type == "ApplyGradientDescent" and
                     op.attrs["var_name"] == parts[1].op.name)
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(w1_update, {once.token: b"s1"})  # ps:1's part arrived, then the step was lost
        assert int(s.run(gs)) == 0 and s.run(parts[0])[0] == W0[0]
        s.run(train, {once.token: b"s1"})
        # the re-run computed its gradient anew, at ps:1's updated half (as any re-run does)
        w1 = W0[1] - lr * _grad(W0)[1]
        w0 = W0[0] - lr * _grad(np.array([W0[0], w1], np.float32))[0]
        np.testing.assert_allclose(_w(s, parts), [w0, w1], rtol=1e-6)
        assert int(s.run(gs)) == 1
        assert _counts(s, once) == {"applied": 3, "dropped": 1}
        s.run(train, {once.token: b"s1"})  # a whole twin: dropped on every ledger
        assert _counts(s, once) == {"applied": 3, "dropped": 4}
        assert int(s.run(gs)) == 1


# ---- bounds and checkpoints -----------------------------------------------------------------

def test_the_ledger_forgets_its_oldest_token_beyond_its_capacity():
    lr = 0.1
    g, parts, gs, train, once, init = _model(tv.train.GradientDescentOptimizer(lr), capacity=2)
    with tv.Session(graph=g) as s:
        s.run(init)
        for t in (b"a", b"b", b"a", b"c", b"b", b"a"):
            s.run(train, {once.token: t})
        # a, b applied; a dropped; c applied (a forgotten); b dropped; a applied again
        assert _counts(s, once) == {"applied": 4, "dropped": 2}
        assert int(s.run(gs)) == 4


def test_a_restored_checkpoint_forgets_exactly_the_tokens_whose_updates_it_forgot(tmp_path):
    lr = 0.1
    g, parts, gs, train, once, init = _model(tv.train.GradientDescentOptimizer(lr))
    with g.as_default():
        saver = tv.train.Saver()
    assert {t.op.name for t, _ in once.ledgers} <= {v.op.name for v in tv.global_variables(g)}
    url = (tmp_path / "ckpt").as_uri()
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(train, {once.token: b"a"})
        path = saver.save(s, url + "/model", global_step=1)
        s.run(train, {once.token: b"b"})
        saver.restore(s, path)  # the update of b is gone: so is b from the ledger
        w_a = W0 - lr * _grad(W0)
        np.testing.assert_allclose(_w(s, parts), w_a, rtol=1e-6)
        s.run(train, {once.token: b"a"})  # still known: dropped
        np.testing.assert_allclose(_w(s, parts), w_a, rtol=1e-6)
        s.run(train, {once.token: b"b"})  # forgotten with its update: applied
        np.testing.assert_allclose(_w(s, parts), w_a - lr * _grad(w_a), rtol=1e-6)
        assert int(s.run(gs)) == 2
        assert _counts(s, once) == {"applied": 2, "dropped": 1}


# ---- what is and is not guarded ---------------------------------------------------------------

def test_variables_made_in_the_block_initialise_and_other_ops_keep_their_edges():
    """Slots made inside the block initialise without a token; a read made after the step's
    updates (a control edge leaving the guarded ops) runs whether the twin was dropped or not."""
    g = tv.Graph()
    with g.as_default():
        w = tv.Variable(np.float32(2.0), name="w")
        opt = tv.train.MomentumOptimizer(0.5, 0.5)
        with tv.train.exactly_once() as once:
            train = opt.minimize(w * w)
            with tv.control_dependencies([train]):
                after = w.read_value()
        init = tv.global_variables_initializer()
    with tv.Session(graph=g) as s:
        s.run(init)
        assert s.run(opt.get_slot(w, "Momentum")) == 0.0
        assert float(s.run(after, {once.token: b"a"})) == 0.0  # 2 - 0.5 * 4
        assert float(s.run(after, {once.token: b"a"})) == 0.0  # the twin: read, not applied
        assert _counts(s, once) == {"applied": 1, "dropped": 1}


# ---- bad input ------------------------------------------------------------------------------

def test_a_non_string_token_is_refused():
    g, parts, gs, train, once, init = _model(tv.train.GradientDescentOptimizer(0.1))
    with tv.Session(graph=g) as s:
        s.run(init)
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"exactly_once/ledger_0/claim: the step token must be a scalar "
                                 r"string \(bytes or str\), got int 7"):
            s.run(train, {once.token: 7})
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"Cannot feed value of shape \(2,\) for Tensor "
                                 r"'exactly_once/token:0'"):
            s.run(train, {once.token: [b"a", b"b"]})
        assert int(s.run(gs)) == 0


def test_nested_blocks_are_refused():
    with tv.Graph().as_default():
        w = tv.Variable(1.0)
        with tv.train.exactly_once() as outer:
            with pytest.raises(tv.errors.InvalidArgumentError,
                               match="exactly_once blocks cannot be nested: one is already open "
                                     "on this graph"):
                with tv.train.exactly_once():
                    pass
            w.assign_add(1.0)
        assert len(outer.ledgers) == 1
        with tv.train.exactly_once():  # closed: a new block may open
            pass


def test_counters_need_a_closed_block_that_guarded_an_update():
    with tv.Graph().as_default():
        with tv.train.exactly_once() as once:
            with pytest.raises(tv.errors.InvalidArgumentError,
                               match=r"counters\(\) is built after the block has closed"):
                once.counters()
            tv.constant(1.0) * 2.0
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"counters\(\) outside any PS: no variable update was created "
                                 "inside the block"):
            once.counters()


def test_a_bad_capacity_is_refused():
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match="capacity must be a positive integer, got 0"):
        tv.train.exactly_once(capacity=0)


def test_ops_made_after_the_block_that_wait_on_the_train_op_run_for_a_twin():
    """``minimize`` inside the block returns an op that runs whether the step applied or was
    dropped (the global step's increment itself does not run for a twin), so a fetch made
    after the block that waits on it has a value either way."""
    g, parts, gs, train, once, init = _model(tv.train.GradientDescentOptimizer(0.1))
    with g.as_default(), tv.control_dependencies([train]):
        step_after = gs.read_value() + 0
    with tv.Session(graph=g) as s:
        s.run(init)
        assert int(s.run(step_after, {once.token: b"a"})) == 1
        assert int(s.run(step_after, {once.token: b"a"})) == 1
        assert _counts(s, once) == {"applied": 1, "dropped": 1}


def test_report_sends_the_counters_to_the_running_job():
    g, parts, gs, train, once, init = _model(tv.train.GradientDescentOptimizer(0.1))
    seen = []
    with tv.Session(graph=g) as s, tv.job.reporting(seen.append):
        s.run(init)
        for t in (b"a", b"a", b"a"):
            s.run(train, {once.token: t})
        assert once.report(s) == {"applied": 1, "dropped": 2}
    assert seen == [{"exactly_once_applied": 1.0, "exactly_once_dropped": 2.0}]


def test_a_step_cancelled_after_its_claim_still_applies_everything_the_claim_gates():
    """The claim recorded the token, then the step was cancelled (its timeout, here while an
    op between two of its updates blocks; on a cluster also another device's failure): the
    updates behind the claim still all run. Stopped halfway, the second would never be
    applied, since the re-run is dropped as a twin."""
    entered, release = threading.Event(), threading.Event()

    def hold(x):
        entered.set()
        release.wait(60)
        return x
    g = tv.Graph()
    with g.as_default():
        w1 = tv.Variable(np.float32(1.0), name="w1")
        w2 = tv.Variable(np.float32(1.0), name="w2")
        with tv.train.exactly_once() as once:
            a = w1.assign_add(1.0)
            b = w2.assign_add(tv.py_func(hold, [a], tv.float32, name="hold"))
        init = tv.global_variables_initializer()
    with tv.Session(graph=g) as s:
        s.run(init)
        with pytest.raises(tv.errors.DeadlineExceededError, match="was cancelled"):
            s.run(b.op, {once.token: b"t"}, options=tv.RunOptions(timeout_in_ms=2000))
        assert entered.is_set(), "the step timed out before its claim: nothing to test"
        release.set()
        deadline = time.monotonic() + 60
        while float(s.run(w2)) != 3.0:  # the cancelled step's second update, after its claim
            assert time.monotonic() < deadline, (s.run([w1, w2]), _counts(s, once))
            time.sleep(0.02)
        s.run(b.op, {once.token: b"t"})  # the client's re-run: a twin
        assert s.run([w1, w2]) == [2.0, 3.0]
        assert _counts(s, once) == {"applied": 1, "dropped": 1}


def test_updates_of_local_variables_are_not_guarded():
    """A worker's own state (an input position, a metric: LOCAL_VARIABLES) is not deduplicated:
    a re-run on another worker would not share it. Only the model's update gets a ledger."""
    g = tv.Graph()
    with g.as_default():
        w = tv.Variable(np.float32(2.0), name="w")
        seen = tv.Variable(np.int64(0), trainable=False, name="seen",
                           collections=[tv.GraphKeys.LOCAL_VARIABLES])
        with tv.train.exactly_once() as once:
            train = tv.group(tv.train.GradientDescentOptimizer(0.25).minimize(w * w),
                             seen.assign_add(1))
        init = [tv.global_variables_initializer(), tv.local_variables_initializer()]
    assert [t.op.name for t, _ in once.ledgers] == ["exactly_once/ledger_0/tokens"]
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(train, {once.token: b"a"})
        s.run(train, {once.token: b"a"})
        assert float(s.run(w)) == 1.0 and int(s.run(seen)) == 2
        assert _counts(s, once) == {"applied": 1, "dropped": 1}


def _adam_first_step(w, gr, lr, b1=0.9, b2=0.999, eps=1e-8):
    """One Adam step (t = 1) of a float32 coordinate; returns (w, m, v)."""
    f = np.float32
    b1, b2, eps, lr = f(b1), f(b2), f(eps), f(lr)
    lr_t = lr * np.sqrt(f(1) - b2) / (f(1) - b1)
    m = (f(1) - b1) * f(gr)
    v = (f(1) - b2) * f(gr) * f(gr)
    return f(w) - lr_t * m / (np.sqrt(v) + eps), m, v


def test_adam_on_two_ps_devices_completes_a_partial_step_each_part_once():
    """Adam over two PS devices: the beta powers (on ps:0) and the global step wait for both
    devices' updates, a region of their own. The step reached ps:1 only, then ran whole: ps:1
    drops, ps:0 applies its half, the powers advance once, the global step counts one."""
    lr = 0.05
    opt = tv.train.AdamOptimizer(lr)
    g, parts, gs, train, once, init = _model(opt, devices=PS)
    assert sorted(t.device for t, _ in once.ledgers) == sorted([PS[0], PS[0], PS[1]])
    w1_update = next(op for op in g.get_operations() if op.type == "ApplyAdam" and
                     op.attrs["var_name"] == parts[1].op.name)
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(w1_update, {once.token: b"s1"})
        s.run(train, {once.token: b"s1"})
        s.run(train, {once.token: b"s1"})
        w1, m1, v1 = _adam_first_step(W0[1], _grad(W0)[1], lr)
        w0, m0, v0 = _adam_first_step(W0[0], _grad(np.array([W0[0], w1], np.float32))[0], lr)
        np.testing.assert_allclose(_w(s, parts), [w0, w1], rtol=1e-6)
        np.testing.assert_allclose([s.run(opt.get_slot(p, "Adam"))[0] for p in parts],
                                   [m0, m1], rtol=1e-6)
        np.testing.assert_allclose([s.run(opt.get_slot(p, "Adam_1"))[0] for p in parts],
                                   [v0, v1], rtol=1e-6)
        b1p, b2p = (s.run(x) for x in opt._powers[parts[0].op.name])
        np.testing.assert_allclose([b1p, b2p], [np.float32(0.9) ** 2, np.float32(0.999) ** 2],
                                   rtol=1e-6)
        assert int(s.run(gs)) == 1
        assert _counts(s, once) == {"applied": 3, "dropped": 4}


def test_an_initializer_made_before_the_block_leaves_the_ledger_uninitialised():
    """The ledger's variables are made when the block closes: an initializer made earlier does
    not cover them, and the step says which variable it needs (as for a slot variable)."""
    g = tv.Graph()
    with g.as_default():
        w = tv.Variable(np.float32(2.0), name="w")
        init = tv.global_variables_initializer()
        with tv.train.exactly_once() as once:
            train = tv.train.GradientDescentOptimizer(0.25).minimize(w * w)
    with tv.Session(graph=g) as s:
        s.run(init)
        with pytest.raises(tv.errors.FailedPreconditionError,
                           match="Attempting to use uninitialized value "
                                 "exactly_once/ledger_0/state"):
            s.run(train, {once.token: b"a"})
        assert float(s.run(w)) == 2.0
