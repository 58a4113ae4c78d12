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


def test_ema_shadows_live_with_their_variables_on_parameter_servers():
    """Under replica_device_setter each shadow is on its variable's PS task (TF's
    colocate_with_primary), so the update is local to the PS; values as on one device."""
    with tf.Graph().as_default():
        with tf.device(tf.train.replica_device_setter(ps_tasks=2,
                                                      worker_device="/job:worker/task:0")):
            a = tf.Variable(1.0, name="a")
            b = tf.Variable([1.0, 2.0], name="b")
            ema = tf.train.ExponentialMovingAverage(0.5)
            update = ema.apply([a, b])
        assert [ema.average(v).op.device for v in (a, b)] == ["/job:ps/task:0",
                                                               "/job:ps/task:1"]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run([a.assign(3.0), b.assign([5.0, 6.0])])
            s.run(update)
            assert s.run(ema.average(a)) == 2.0
            np.testing.assert_array_equal(s.run(ema.average(b)), [3.0, 4.0])


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


# ---- checkpoint utilities ------------------------------------------------------------------------

def _save(url, values: dict, step=None, graph=None):
    """Save variables named by ``values`` to ``url`` (a prefix URL); return the path."""
    with tf.Graph().as_default():
        vs = [tf.Variable(v, name=k) for k, v in values.items()]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            return tf.train.Saver(vs).save(s, url, global_step=step)


def test_get_and_update_checkpoint_state(tmp_path):
    d = str(tmp_path / "train")
    assert tf.train.get_checkpoint_state(d) is None
    p1 = _save(d + "/model.ckpt", {"w": np.ones(2)}, step=1)
    p2 = _save(d + "/model.ckpt", {"w": np.zeros(2)}, step=2)
    st = tf.train.get_checkpoint_state(d)
    assert st.model_checkpoint_path == p2 == f"{d}/model.ckpt-2"
    assert st.all_model_checkpoint_paths == [p1, p2]
    assert len(st.all_model_checkpoint_timestamps) == 2
    # the CIFAR-10 evaluation's idiom: the step from the path
    assert st.model_checkpoint_path.split("/")[-1].split("-")[-1] == "2"
    assert 'model_checkpoint_path: "' + p2 + '"' in str(st)
    # point the state back at the first checkpoint
    tf.train.update_checkpoint_state(d, p1, all_model_checkpoint_paths=[p1])
    st = tf.train.get_checkpoint_state(d)
    assert (st.model_checkpoint_path, st.all_model_checkpoint_paths) == (p1, [p1])
    assert tf.train.latest_checkpoint(d) == p1
    # a state naming an uncommitted checkpoint falls back to the committed one it lists
    tf.train.update_checkpoint_state(d, f"{d}/model.ckpt-9", [p2, f"{d}/model.ckpt-9"])
    assert tf.train.get_checkpoint_state(d).model_checkpoint_path == p2
    with pytest.raises(tf.errors.InvalidArgumentError, match="is not in"):
        tf.train.update_checkpoint_state(d, str(tmp_path / "elsewhere" / "m-1"))
    with pytest.raises(RuntimeError, match="conflicts with path used for checkpoint state"):
        tf.train.update_checkpoint_state(d, f"{d}/checkpoint")


def test_get_checkpoint_state_reads_tf_text_state(tmp_path):
    (tmp_path / "checkpoint").write_text(
        'model_checkpoint_path: "model.ckpt-20"\n'
        'all_model_checkpoint_paths: "model.ckpt-10"\n'
        'all_model_checkpoint_paths: "model.ckpt-20"\n')
    st = tf.train.get_checkpoint_state(str(tmp_path))
    assert st.model_checkpoint_path == f"{tmp_path}/model.ckpt-20"
    assert st.all_model_checkpoint_paths == [f"{tmp_path}/model.ckpt-10",
                                             f"{tmp_path}/model.ckpt-20"]


def test_generate_checkpoint_state_proto():
    st = tf.train.generate_checkpoint_state_proto("train", "train/m-3", ["train/m-1"])
    assert st.model_checkpoint_path == "m-3"
    assert st.all_model_checkpoint_paths == ["m-1", "m-3"]  # appended: not the last entry
    st = tf.train.generate_checkpoint_state_proto("/abs/train", "/abs/train/m-3")
    assert st.all_model_checkpoint_paths == ["/abs/train/m-3"]  # absolute stays absolute
    with pytest.raises(ValueError, match=r"Checkpoint timestamps, if provided, must match "
                                         r"checkpoint paths"):
        tf.train.generate_checkpoint_state_proto("d", "d/m-2", ["d/m-1", "d/m-2"],
                                                 all_model_checkpoint_timestamps=[1.0])


def test_reader_list_load_mtimes_and_remove(tmp_path):
    d = str(tmp_path)
    p1 = _save(d + "/m", {"a/w": np.arange(6.0).reshape(2, 3), "n": np.int64(7),
                          "s": np.array([b"x", b"yz"])}, step=1)
    p2 = _save(d + "/m", {"a/w": np.zeros((2, 3))}, step=2)
    assert tf.train.list_variables(p1) == [("a/w", [2, 3]), ("n", []), ("s", [2])]
    np.testing.assert_array_equal(tf.train.load_variable(p1, "a/w"),
                                  np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(tf.train.load_variable(d, "a/w"), np.zeros((2, 3)))  # latest
    r = tf.train.load_checkpoint(p1)
    assert r.has_tensor("n") and not r.has_tensor("zz")
    assert int(r.get_tensor("n")) == 7
    assert r.get_variable_to_shape_map() == {"a/w": [2, 3], "n": [], "s": [2]}
    assert r.get_variable_to_dtype_map() == {"a/w": tf.float64, "n": tf.int64, "s": tf.string}
    assert b"a/w (float64) [2, 3]" in r.debug_string()
    with pytest.raises(tf.errors.NotFoundError, match="Key zz not found in checkpoint"):
        r.get_tensor("zz")
    with pytest.raises(tf.errors.NotFoundError, match="Unsuccessful TensorSliceReader "
                                                      "constructor: Failed to find any "
                                                      "matching files for"):
        tf.train.NewCheckpointReader(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file or checkpoints"):
        tf.train.list_variables(str(tmp_path / "nothing"))
    t1, t2 = tf.train.get_checkpoint_mtimes([p1, d + "/missing", p2])
    assert 0 < t1 <= t2
    tf.train.remove_checkpoint(p1)
    assert not tf.train.checkpoint_exists(p1) and tf.train.checkpoint_exists(p2)
    assert tf.train.get_checkpoint_mtimes([p1]) == []


def test_init_from_checkpoint_assignment_maps(tmp_path):
    ckpt = _save(str(tmp_path / "m"), {"old/w": np.full((2, 2), 3.0), "old/b": np.ones(2),
                                       "c": np.float64(5.0), "emb": np.arange(8.0).reshape(4, 2)})
    with tf.Graph().as_default():
        with tf.variable_scope("new"):
            w = tf.get_variable("w", [2, 2], tf.float64)
            b = tf.get_variable("b", [2], tf.float64)
        c2 = tf.get_variable("c2", [], tf.float64)
        free = tf.Variable(np.float64(-1.0), name="free")
        kept = tf.get_variable("kept", [], tf.float64, initializer=tf.constant_initializer(9.0))
        with tf.variable_scope("p", partitioner=tf.fixed_size_partitioner(2)):
            emb = tf.get_variable("emb", [4, 2], tf.float64)
        tf.train.init_from_checkpoint(str(tmp_path), {"old/": "new/", "c": "c2", "emb": emb})
        tf.train.init_from_checkpoint(ckpt, [("c", free)])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(s.run(w), np.full((2, 2), 3.0))
            np.testing.assert_array_equal(s.run(b), np.ones(2))
            assert s.run(c2) == 5.0 and s.run(free) == 5.0 and s.run(kept) == 9.0
            np.testing.assert_array_equal(np.concatenate([s.run(p) for p in emb]),
                                          np.arange(8.0).reshape(4, 2))
        with pytest.raises(ValueError, match=r"Tensor nope is not found in .* checkpoint"):
            tf.train.init_from_checkpoint(ckpt, {"nope": "c2"})
        with pytest.raises(ValueError, match=r"Shape of variable new/b:0 \(\(2,\)\) doesn't "
                                             r"match with shape of tensor old/w \(\[2, 2\]\)"):
            tf.train.init_from_checkpoint(ckpt, {"old/w": b})
        with pytest.raises(ValueError, match="Assignment map with scope only name new should "
                                             "map to scope only old"):
            tf.train.init_from_checkpoint(ckpt, {"old": "new/"})
        with pytest.raises(ValueError, match=r"Tensor old/c2 \(.*\) is not found"):
            tf.train.init_from_checkpoint(ckpt, {"old/": "/"})


def test_checkpoints_iterator_and_timeout_fn(tmp_path):
    d = str(tmp_path)
    assert list(tf.train.checkpoints_iterator(d, timeout=0)) == []
    p1 = _save(d + "/m", {"w": np.ones(1)}, step=1)
    saved = []

    def timeout_fn():  # called when no new checkpoint came in time: save one, then stop
        if not saved:
            saved.append(_save(d + "/m", {"w": np.ones(1)}, step=2))
            return False
        return True
    got = list(tf.train.checkpoints_iterator(d, timeout=0, timeout_fn=timeout_fn))
    assert got == [p1, saved[0]]


def test_summary_iterator_and_write_graph(tmp_path):
    logdir = str(tmp_path / "logs")
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [], name="x")
        tf.summary.scalar("loss", x * 2.0)
        merged = tf.summary.merge_all()
        w = tf.summary.FileWriter(logdir)
        with tf.Session() as s:
            for step in range(3):
                w.add_summary(s.run(merged, {x: float(step)}), step)
        w.close()
        import glob
        (path,) = glob.glob(logdir + "/events.out.tfevents.*")
        events = list(tf.train.summary_iterator(path))
        assert events[0].file_version == "brain.Event:2"
        got = [(e.step, v.tag, v.simple_value) for e in events for v in e.summary.value]
        assert got == [(0, "loss", 0.0), (1, "loss", 2.0), (2, "loss", 4.0)]
        out = tf.train.write_graph(g, str(tmp_path / "graphs"), "g.pbtxt")
        assert out == str(tmp_path / "graphs" / "g.pbtxt")
        import json
        with open(out) as f:
            names = [n["name"] for n in json.load(f)["node"]]
        assert "x" in names
        binary = tf.train.write_graph(g, str(tmp_path / "graphs"), "g.pb", as_text=False)
        from tensorboardX.proto.graph_pb2 import GraphDef
        with open(binary, "rb") as f:
            gd = GraphDef.FromString(f.read())
        assert "x" in [n.name for n in gd.node]
    with pytest.raises(tf.errors.NotFoundError, match="No such file"):
        list(tf.train.summary_iterator(str(tmp_path / "none")))
    with pytest.raises(TypeError, match="write_graph expects"):
        tf.train.write_graph(3, str(tmp_path), "x")


# ---- learning-rate schedules ---------------------------------------------------------------------

def _schedule(build, steps):
    with tf.Graph().as_default():
        step = tf.placeholder(tf.int64, [])
        lr = build(step)
        with tf.Session() as s:
            return np.array([s.run(lr, {step: i}) for i in steps], np.float64)


def _np_sgdr(lr, step, first, t_mul, m_mul, alpha):
    """SGDR by walking the periods (no closed form), as a reference."""
    start, length, i = 0.0, float(first), 0
    while step >= start + length:
        start, length, i = start + length, length * t_mul, i + 1
    frac = (step - start) / length
    return lr * ((1 - alpha) * 0.5 * m_mul ** i * (1 + np.cos(np.pi * frac)) + alpha)


@pytest.mark.parametrize("first,t_mul,m_mul,alpha", [(10, 2.0, 1.0, 0.0), (7, 1.0, 0.5, 0.1),
                                                     (5, 3.0, 0.8, 0.05)])
def test_cosine_decay_restarts(first, t_mul, m_mul, alpha):
    steps = list(range(0, 60, 2))
    got = _schedule(lambda s: tf.train.cosine_decay_restarts(0.1, s, first, t_mul=t_mul,
                                                              m_mul=m_mul, alpha=alpha), steps)
    ref = [_np_sgdr(0.1, i, first, t_mul, m_mul, alpha) for i in steps]
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-7)


def test_cosine_decay_restarts_with_a_tensor_t_mul():
    steps = list(range(0, 40, 3))
    got = _schedule(lambda s: tf.train.cosine_decay_restarts(
        0.1, s, 5, t_mul=tf.constant(2.0)), steps)
    np.testing.assert_allclose(got, [_np_sgdr(0.1, i, 5, 2.0, 1.0, 0.0) for i in steps],
                               rtol=2e-5, atol=1e-7)


def test_linear_cosine_decay_and_piecewise_constant_decay():
    steps = list(range(0, 45, 3))
    got = _schedule(lambda s: tf.train.linear_cosine_decay(0.2, s, 20, num_periods=2.0,
                                                           alpha=0.1, beta=0.01), steps)
    t = np.minimum(steps, 20) / 20.0
    ref = 0.2 * ((0.1 + (1 - t)) * 0.5 * (1 + np.cos(2 * np.pi * 2.0 * t)) + 0.01)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-7)
    got = _schedule(lambda s: tf.train.piecewise_constant_decay(s, [5, 15], [1.0, 0.5, 0.1]),
                    [0, 5, 6, 15, 16])
    np.testing.assert_allclose(got, [1.0, 1.0, 0.5, 0.5, 0.1], rtol=1e-7)


def test_noisy_linear_cosine_decay_has_the_stated_noise():
    """Mean: the linear-cosine rate; standard deviation: lr * sqrt(initial_variance /
    (1 + step) ** variance_decay) * cosine term."""
    with tf.Graph().as_default():
        step = tf.placeholder(tf.int64, [])
        lr = tf.train.noisy_linear_cosine_decay(0.1, step, 30, initial_variance=1.0,
                                                variance_decay=0.55)
        with tf.Session() as s:
            draws = np.array([s.run(lr, {step: 10}) for _ in range(2000)], np.float64)
            assert s.run(lr, {step: 40}) == pytest.approx(0.1 * 0.001)  # past decay_steps
    cosine = 0.5 * (1 + np.cos(np.pi * 10 / 30))
    mean = 0.1 * ((20 / 30) * cosine + 0.001)
    std = 0.1 * np.sqrt(1.0 / 11 ** 0.55) * cosine
    assert abs(draws.mean() - mean) < 4 * std / np.sqrt(len(draws))
    assert draws.std() == pytest.approx(std, rel=0.1)


def test_new_schedules_need_a_global_step():
    for fn, args in ((tf.train.cosine_decay_restarts, (10,)),
                     (tf.train.linear_cosine_decay, (10,)),
                     (tf.train.noisy_linear_cosine_decay, (10,))):
        with pytest.raises(ValueError, match=f"global_step is required for {fn.__name__}"):
            fn(0.1, None, *args)


def test_warm_start(tmp_path):
    _save(str(tmp_path / "m"), {"dense/w": np.full(2, 4.0), "dense/b": np.float64(1.5),
                                "old_emb": np.arange(6.0).reshape(3, 2),
                                "other": np.float64(8.0)})
    with tf.Graph().as_default():
        with tf.variable_scope("dense"):
            w = tf.get_variable("w", [2], tf.float64, initializer=tf.zeros_initializer())
            b = tf.get_variable("b", [], tf.float64, initializer=tf.zeros_initializer())
        with tf.variable_scope("e", partitioner=tf.fixed_size_partitioner(3)):
            emb = tf.get_variable("emb", [3, 2], tf.float64)
        other = tf.get_variable("other", [], tf.float64, initializer=tf.zeros_initializer(),
                                trainable=False)
        tf.train.warm_start(str(tmp_path), vars_to_warm_start="dense/w|e/.*",
                            var_name_to_prev_var_name={"e/emb": "old_emb"})
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(s.run(w), [4.0, 4.0])
            assert s.run(b) == 0.0 and s.run(other) == 0.0  # not chosen / not trainable
            np.testing.assert_array_equal(np.concatenate([s.run(p) for p in emb]),
                                          np.arange(6.0).reshape(3, 2))
        tf.train.warm_start(str(tmp_path), ["oth.*"])  # a list: every global variable
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            assert s.run(other) == 8.0
        with pytest.raises(ValueError, match="that were not used: {'dense/q': 'x'}"):
            tf.train.warm_start(str(tmp_path), "dense/.*",
                                var_name_to_prev_var_name={"dense/q": "x"})
        with pytest.raises(ValueError, match="vocabulary remapping"):
            tf.train.warm_start(str(tmp_path), var_name_to_vocab_info={"dense/w": object()})


TF_CKPT_DIR = str(__import__("pathlib").Path(__file__).parent / "data" / "tf_ckpt")


def test_checkpoint_utilities_on_a_tensorflow_checkpoint():
    """tests/data/tf_ckpt was written by TensorFlow's own Saver (text state file, bundle)."""
    prefix = TF_CKPT_DIR + "/model.ckpt-7"
    st = tf.train.get_checkpoint_state(TF_CKPT_DIR)
    assert st.model_checkpoint_path == prefix
    assert tf.train.checkpoint_exists(prefix)
    assert not tf.train.checkpoint_exists(TF_CKPT_DIR + "/model.ckpt-8")
    (mtime,) = tf.train.get_checkpoint_mtimes([prefix, TF_CKPT_DIR + "/model.ckpt-8"])
    assert mtime > 0
    r = tf.train.load_checkpoint(TF_CKPT_DIR)
    assert r.get_variable_to_dtype_map() == {
        "w": tf.float32, "dense/kernel": tf.float64, "dense/bias": tf.int32,
        "global_step": tf.int64, "words": tf.string, "flag": tf.bool}
    np.testing.assert_array_equal(r.get_tensor("dense/bias"), [1, -2, 3, -4])
    with tf.Graph().as_default():
        with tf.variable_scope("mine"):
            k = tf.get_variable("kernel", [2, 4], tf.float64)
        w = tf.Variable(np.zeros((3, 2), np.float32), name="w2")
        tf.train.init_from_checkpoint(TF_CKPT_DIR, {"dense/kernel": "mine/kernel", "w": w})
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_allclose(s.run(k), np.linspace(-1, 1, 8).reshape(2, 4))
            np.testing.assert_array_equal(s.run(w), np.arange(6, dtype=np.float32)
                                          .reshape(3, 2) * 0.5)
