"""``tv.train.exactly_once`` on a LocalCluster of worker processes (ps-0, ps-1, worker-0): the
variables live on two PS processes, the gradients are computed on the worker, and each PS
applies a step token's part at most once. The failure-first case of issue 26: a worker killed
(SIGKILL) after the PS applied its step but before the step's result reached the client; the
step re-run with its token is counted once."""
import threading
import time

import numpy as np
import pytest
import tensorvm as tv

pytestmark = [pytest.mark.cluster, pytest.mark.filterwarnings("ignore::ResourceWarning")]

TV_CLUSTER = {"ps": 2, "worker": 1}
PS = ("/job:ps/task:0", "/job:ps/task:1")
WORKER = "/job:worker/task:0"

X = np.array([[1.0, 2.0], [0.5, -1.0], [-2.0, 0.25]], np.float32)
Y = np.array([1.0, -0.5, 2.0], np.float32)
W0 = np.array([0.3, -0.2], np.float32)


def _grad(w):
    return (2.0 / len(Y)) * X.T @ (X @ w - Y)


def _model(opt, guard=True, after=None, name="w"):
    """Half of w on each PS, the global step on ps:0, the loss and gradients on the worker.
    ``after(train, loss)``: an op made inside the block that waits for the step's updates."""
    g = tv.Graph()
    with g.as_default():
        parts = []
        for i, dev in enumerate(PS):
            with tv.device(dev):
                parts.append(tv.Variable(W0[i:i + 1], name=f"{name}{i}"))
        with tv.device(PS[0]):
            gs = tv.train.get_or_create_global_step()
        once, extra = None, None
        with tv.device(WORKER):
            w = tv.concat(parts, axis=0)
            loss = tv.reduce_mean((tv.reduce_sum(X * w, axis=1) - Y) ** 2)
            if guard:
                with tv.train.exactly_once() as once:
                    train = opt.minimize(loss, global_step=gs)
                    if after is not None:
                        extra = after(train, loss)
            else:
                train = opt.minimize(loss, global_step=gs)
        init = tv.global_variables_initializer()
    return g, parts, gs, train, once, init, extra


def _w(s, parts):
    return np.concatenate([s.run(p) for p in parts])


def _counts(s, once):
    return {k: int(v) for k, v in s.run(once.counters()).items()}


@pytest.fixture
def clean(cluster):
    tv.Session.reset(cluster.address)
    cluster.wait_full()
    return cluster


def test_a_twin_on_two_ps_processes_changes_nothing_and_is_counted(clean):
    """The same token twice: variables, Momentum slots and the global step as NumPy has them
    after one update; every ledger (ps-0, ps-1, the global step's increment on ps-0) drops
    the twin. The unguarded graph applies the same double run twice."""
    lr, mu = 0.1, 0.9
    opt = tv.train.MomentumOptimizer(lr, mu)
    g, parts, gs, train, once, init, _ = _model(opt)
    assert sorted(t.device for t, _ in once.ledgers) == sorted([PS[0], PS[0], PS[1]])
    s = clean.session(g)
    s.run(init)
    s.run(train, {once.token: b"step-1"})
    s.run(train, {once.token: b"step-1"})
    acc = _grad(W0)
    np.testing.assert_allclose(_w(s, parts), W0 - lr * acc, rtol=1e-6)
    np.testing.assert_allclose(
        np.concatenate([s.run(opt.get_slot(p, "Momentum")) for p in parts]), acc, rtol=1e-6)
    assert int(s.run(gs)) == 1
    assert _counts(s, once) == {"applied": 3, "dropped": 3}
    s.run(train, {once.token: b"step-2"})
    acc2 = mu * acc + _grad(W0 - lr * acc)
    np.testing.assert_allclose(_w(s, parts), W0 - lr * acc - lr * acc2, rtol=1e-5)
    assert int(s.run(gs)) == 2

    g, parts, gs, train, _, init, _ = _model(tv.train.MomentumOptimizer(lr, mu), guard=False,
                                             name="u")
    s = clean.session(g)
    s.run(init)
    s.run(train)
    s.run(train)
    np.testing.assert_allclose(_w(s, parts), W0 - lr * acc - lr * acc2, rtol=1e-5)
    assert int(s.run(gs)) == 2


def test_each_ps_process_dedups_its_own_part(clean):
    """The step reached ps-1 only (its update op run alone with the token), then ran whole:
    ps-1 drops, ps-0 applies its half and the global step's increment."""
    lr = 0.1
    g, parts, gs, train, once, init, _ = _model(tv.train.GradientDescentOptimizer(lr))
    w1_update = next(op for op in g.get_operations() if op.type == "ApplyGradientDescent" and
                     op.attrs["var_name"] == parts[1].op.name)
    s = clean.session(g)
    s.run(init)
    s.run(w1_update, {once.token: b"s1"})
    s.run(train, {once.token: b"s1"})
    w1 = W0[1] - lr * _grad(W0)[1]
    w0 = W0[0] - lr * _grad(np.array([W0[0], w1], np.float32))[0]
    np.testing.assert_allclose(_w(s, parts), [w0, w1], rtol=1e-6)
    assert int(s.run(gs)) == 1
    assert _counts(s, once) == {"applied": 3, "dropped": 1}


def test_worker_killed_after_the_ps_applied_its_step_rerun_is_counted_once(clean, tmp_path):
    """The issue's failure-first case with real processes: the step's last op, on the worker,
    runs only after both PS applied the step (it waits on them); it marks a file and blocks,
    and the test kills the worker then. The client gets UnavailableError, never the result,
    and runs the step again with its token on the restarted worker: no PS applies it twice."""
    lr = 0.1
    started, hold = tmp_path / "started", tmp_path / "hold"
    hold.touch()

    def result(x):
        started.touch()
        while hold.exists():
            time.sleep(0.02)
        return x

    def after(train, loss):
        with tv.control_dependencies([train]):
            return tv.py_func(result, [loss], tv.float32, name="result")
    g, parts, gs, train, once, init, out = _model(tv.train.GradientDescentOptimizer(lr),
                                                  after=after)
    s = clean.session(g)
    s.run(init)
    box = {}

    def step():
        try:
            box["value"] = s.run(out, {once.token: b"k"})
        except BaseException as e:  # noqa: BLE001 - checked below
            box["error"] = e
    th = threading.Thread(target=step)
    th.start()
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline, "the step's result op never started"
        time.sleep(0.02)
    clean.kill("worker-0")
    th.join(60)
    assert not th.is_alive()
    assert "value" not in box and isinstance(box.get("error"), tv.errors.UnavailableError), box
    hold.unlink()
    clean.wait_full()
    one = W0 - lr * _grad(W0)
    loss_one = float(np.mean((X @ one - Y) ** 2))
    got = s.run(out, {once.token: b"k"})  # the re-run: its result reaches the client
    np.testing.assert_allclose(got, loss_one, rtol=1e-6)
    np.testing.assert_allclose(_w(s, parts), one, rtol=1e-6)
    assert int(s.run(gs)) == 1
    assert _counts(s, once) == {"applied": 3, "dropped": 3}


def test_a_restored_checkpoint_on_the_ps_processes_forgets_the_tokens_it_forgot(clean,
                                                                                 tmp_path):
    """Each PS process saves its ledgers with its variables (its own shard) and gets them
    back on restore: a token applied before the save is still dropped, one applied after it
    (its update gone with the restore) is applied again."""
    lr = 0.1
    g, parts, gs, train, once, init, _ = _model(tv.train.GradientDescentOptimizer(lr),
                                                name="c")
    with g.as_default():
        saver = tv.train.Saver()
    s = clean.session(g)
    s.run(init)
    s.run(train, {once.token: b"a"})
    path = saver.save(s, (tmp_path / "ckpt").as_uri() + "/model", global_step=1)
    s.run(train, {once.token: b"b"})
    saver.restore(s, path)
    one = W0 - lr * _grad(W0)
    s.run(train, {once.token: b"a"})
    np.testing.assert_allclose(_w(s, parts), one, rtol=1e-6)
    s.run(train, {once.token: b"b"})
    np.testing.assert_allclose(_w(s, parts), one - lr * _grad(one), rtol=1e-6)
    assert int(s.run(gs)) == 2
    assert _counts(s, once) == {"applied": 6, "dropped": 3}
