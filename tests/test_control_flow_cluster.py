"""Control flow on worker processes (issue 14 item 7): a cond whose predicate lives on one
task and whose true branch spans two tasks (dead values and dead control tokens cross
Send/Recv pickled, and stay dead: the untaken side updates nothing on either), and a
while_loop (its functional op and body program shipped to a worker) with its gradient."""
import numpy as np
import pytest
import tensorvm as tv

pytestmark = pytest.mark.cluster

TV_CLUSTER = {"ps": 1, "worker": 1}
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state


def test_cond_across_workers_and_while_loop_gradient(tv_cluster, g):
    with tv.device("/job:ps/task:0"):
        x = tv.placeholder(tv.float64, [2])
        w = tv.Variable([1.0, 2.0], dtype=tv.float64)
        ps_count = tv.Variable(0, name="ps_count")
    with tv.device("/job:worker/task:0"):
        count = tv.Variable(0, name="count")
        pred = tv.reduce_sum(x) > 0

        def true_fn():
            a = tv.cast(tv.assign_add(count, 1), tv.float64) * 0.0
            with tv.device("/job:ps/task:0"):  # a control edge and a data edge from the worker
                b = tv.cast(tv.assign_add(ps_count, 1), tv.float64) * 0.0
                c = x * w
            return a + b + c
        y = tv.cond(pred, true_fn, lambda: x - w)
        z = tv.while_loop(lambda k, v: k < 3, lambda k, v: (k + 1, tv.sin(v) * w),
                          [0, y])[1]
        gw = tv.gradients(tv.reduce_sum(z), w)[0]
    sess = tv_cluster.session()
    sess.run(tv.global_variables_initializer())
    xv, wv = np.array([0.5, 1.0]), np.array([1.0, 2.0])

    def f(xv, wv):
        v = xv * wv if xv.sum() > 0 else xv - wv
        for _ in range(3):
            v = np.sin(v) * wv
        return v
    got_z, got_g = sess.run([z, gw], {x: xv})
    np.testing.assert_allclose(got_z, f(xv, wv))
    eps = 1e-6
    num = [(f(xv, wv + eps * e).sum() - f(xv, wv - eps * e).sum()) / (2 * eps)
           for e in np.eye(2)]
    np.testing.assert_allclose(got_g, num, rtol=1e-5)
    assert sess.run([count, ps_count]) == [1, 1]  # z and gw share one run of the branch
    np.testing.assert_allclose(sess.run(z, {x: -xv}), f(-xv, wv))
    np.testing.assert_allclose(sess.run(gw, {x: -xv}), [
        (f(-xv, wv + eps * e).sum() - f(-xv, wv - eps * e).sum()) / (2 * eps)
        for e in np.eye(2)], rtol=1e-5)
    assert sess.run([count, ps_count]) == [1, 1]  # the untaken branch ran on neither task
