"""tv.train's utilities beyond the optimizers, against NumPy references and TF 1.x's rules:
ExponentialMovingAverage (shadow names, decay rules, zero_debias, restoring averages through a
Saver as the CIFAR-10 tutorial's evaluation does), the checkpoint utilities, the extra
learning-rate schedules."""
from __future__ import annotations

import numpy as np
import pytest

import tensorvm as tf


# ---- ExponentialMovingAverage -------------------------------------------------------------------

def _np_ema(values, decay, num_updates=None):
    """The shadow of a variable taking ``values`` (the first is its initial value). As TF,
    the decay is a float32 and ``1 - decay`` is taken in float32."""
    avg = np.asarray(values[0], dtype=np.float64)
    out = []
    for i, v in enumerate(values):
        d = np.float32(decay)
        if num_updates is not None:
            n = np.float32(num_updates[i])
            d = min(d, (np.float32(1) + n) / (np.float32(10) + n))
        avg = avg - (avg - v) * np.float64(np.float32(1) - d)
        out.append(avg.copy())
    return out


def test_ema_follows_variable_with_fixed_decay():
    vals = [np.array([1.0, -2.0]), np.array([3.0, 0.5]), np.array([-1.0, 4.0]),
            np.array([2.0, 2.0])]
    with tf.Graph().as_default():
        w = tf.Variable(vals[0], name="w")
        ema = tf.train.ExponentialMovingAverage(0.7)
        update = ema.apply([w])
        new = tf.placeholder(tf.float64, [2])
        set_w = w.assign(new)
        got = []
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_allclose(s.run(ema.average(w)), vals[0])  # starts at w's value
            for v in vals:
                s.run(set_w, {new: v})
                s.run(update)
                got.append(s.run(ema.average(w)))
    np.testing.assert_allclose(got, _np_ema(vals, 0.7), rtol=1e-12)


def test_ema_num_updates_lowers_the_decay():
    with tf.Graph().as_default():
        w = tf.Variable(0.0, name="w")
        step = tf.Variable(0, name="global_step", trainable=False)
        ema = tf.train.ExponentialMovingAverage(0.99, num_updates=step)
        update = ema.apply([w])
        vals, steps, got = [0.0], [0], []
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for i in range(1, 6):
                s.run([w.assign(float(i * i)), step.assign(i)])
                s.run(update)
                vals.append(float(i * i))
                steps.append(i)
                got.append(float(s.run(ema.average(w))))
    # the reference starts from w's initial value 0 at step 0 (no update), then one per step
    ref = _np_ema(vals, 0.99, steps)[1:]
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    # min(0.99, (1 + 1) / (10 + 1)) = 2/11 at step 1: avg = 0 - (0 - 1) * 9/11
    assert got[0] == pytest.approx(9 / 11, rel=1e-6)


def test_ema_of_a_tensor_with_zero_debias():
    """A tensor's shadow starts at 0; zero_debias divides by 1 - decay**t (Adam's rule)."""
    xs = [np.array([2.0, -1.0]), np.array([4.0, 3.0]), np.array([0.0, 1.0])]
    for debias in (False, True):
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32, [2])
            t = x * 1.0
            ema = tf.train.ExponentialMovingAverage(0.8, zero_debias=debias)
            update = ema.apply([t])
            got = []
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                for v in xs:
                    s.run(update, {x: v})
                    got.append(s.run(ema.average(t)))
            names = sorted(v.op.name for v in tf.global_variables())
        biased, ref = np.zeros(2), []
        for i, v in enumerate(xs, 1):
            biased = biased - (biased - v) * 0.2
            ref.append(biased / (1 - 0.8 ** i) if debias else biased)
        np.testing.assert_allclose(got, ref, rtol=1e-5)
        shadow = ema.average(t).op.name
        assert shadow == f"{t.op.name}/ExponentialMovingAverage"
        extra = [f"{shadow}/biased", f"{shadow}/local_step"] if debias else []
        assert names == sorted([shadow] + extra)


def test_ema_names_collections_and_variables_to_restore():
    with tf.Graph().as_default():
        w = tf.Variable([1.0, 2.0], name="w")
        with tf.variable_scope("outer"):
            b = tf.Variable(3.0, name="b")
        step = tf.Variable(0, name="global_step", trainable=False)
        ema = tf.train.ExponentialMovingAverage(0.9)
        assert ema.name == "ExponentialMovingAverage"
        assert ema.average_name(w) == "w/ExponentialMovingAverage"  # before apply too
        assert ema.average(w) is None
        with tf.name_scope("train"):
            op = ema.apply([w, b])
        assert (op.name, op.type) == ("train/ExponentialMovingAverage", "NoOp")
        assert ema.average(w).op.name == "w/ExponentialMovingAverage"
        assert ema.average(b).op.name == "outer/b/ExponentialMovingAverage"
        assert not ema.average(w).trainable
        assert ema.average(w) not in tf.trainable_variables()
        assert tf.get_collection(tf.GraphKeys.MOVING_AVERAGE_VARIABLES) == [w, b]
        # a second EMA of the same variable gets the next free name
        other = tf.train.ExponentialMovingAverage(0.5)
        other.apply([w])
        assert other.average(w).op.name == "w/ExponentialMovingAverage_1"
        # apply again: no new shadows
        n = len(tf.global_variables())
        ema.apply([w])
        assert len(tf.global_variables()) == n
        restore = ema.variables_to_restore()
        assert restore["w/ExponentialMovingAverage"] is w
        assert restore["outer/b/ExponentialMovingAverage"] is b
        assert restore["global_step"] is step
        assert "w" not in restore and "outer/b" not in restore
        only = ema.variables_to_restore([w])
        assert only["w/ExponentialMovingAverage"] is w and only["outer/b"] is b


def test_ema_under_a_variable_scope_and_errors():
    with tf.Graph().as_default():
        w = tf.Variable([1.0], name="w")
        with tf.variable_scope("vs"):
            ema = tf.train.ExponentialMovingAverage(0.9)
            ema.apply([w])
        assert ema.average(w).op.name == "vs/w/ExponentialMovingAverage"
        i = tf.Variable(1, name="i")
        with pytest.raises(TypeError, match=r"The variables must be half, float, or double: "
                                            r"i:0"):
            ema.apply([i])
        with pytest.raises(TypeError, match="The variables must be half, float, or double"):
            ema.apply([tf.constant([1, 2])])


def test_ema_restore_averages_into_the_model(tmp_path):
    """The CIFAR-10 tutorial: train with an EMA, save, then evaluate a fresh model whose
    variables are restored from their moving averages."""
    url = str(tmp_path / "ckpt")
    with tf.Graph().as_default():
        w = tf.Variable([0.0, 0.0], name="w")
        step = tf.train.get_or_create_global_step()
        ema = tf.train.ExponentialMovingAverage(0.5, num_updates=step)
        train = tf.group(w.assign_add([1.0, 2.0]), tf.assign_add(step, 1))
        with tf.control_dependencies([train]):
            train_op = ema.apply(tf.trainable_variables())
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(4):
                s.run(train_op)
            avg, final = s.run([ema.average(w), w])
            path = tf.train.Saver().save(s, url + "/model.ckpt", global_step=4)
    assert not np.allclose(avg, final)
    with tf.Graph().as_default():
        w = tf.Variable([9.0, 9.0], name="w")
        tf.train.get_or_create_global_step()
        ema = tf.train.ExponentialMovingAverage(0.5)
        saver = tf.train.Saver(ema.variables_to_restore())
        with tf.Session() as s:
            saver.restore(s, path)
            np.testing.assert_allclose(s.run(w), avg)
            assert int(s.run(tf.train.get_global_step())) == 4
