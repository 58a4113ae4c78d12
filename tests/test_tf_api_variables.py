"""Issue 14, item 5: variables the TF 1.x way — get_variable, variable_scope (reuse,
AUTO_REUSE, initializers, regularizers, partitioners, custom getters), the initializers,
GraphKeys and collections, local variables."""
from __future__ import annotations

import numpy as np
import pytest

import tensorvm as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default() as g:
        yield g


def init_and_run(fetches, feed=None):
    with tf.Session() as s:
        s.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        return s.run(fetches, feed)


def test_scopes_name_variables_and_ops():
    with tf.variable_scope("foo"):
        with tf.variable_scope("bar"):
            v = tf.get_variable("v", [1])
            op = tf.add(v, 1.0)
        assert tf.get_variable_scope().name == "foo"
    assert v.name == "foo/bar/v:0" and op.name == "foo/bar/Add:0"
    with tf.name_scope("ns"):  # a name scope does not change variable names
        with tf.variable_scope("vs"):
            w = tf.get_variable("w", [2])
    assert w.name == "vs/w:0"


def test_reuse_true_shares_and_refuses_new():
    with tf.variable_scope("s"):
        v = tf.get_variable("v", [2, 3])
    with tf.variable_scope("s", reuse=True):
        assert tf.get_variable("v", [2, 3]) is v
        assert tf.get_variable("v") is v  # the shape may be left out
        with tf.variable_scope("inner"):  # reuse is inherited
            assert tf.get_variable_scope().reuse is True
        with pytest.raises(ValueError, match="Variable s/w does not exist"):
            tf.get_variable("w", [1])
        with pytest.raises(ValueError, match=r"specified shape \[3, 3\] and found shape \[2, 3\]"):
            tf.get_variable("v", [3, 3])
        with pytest.raises(ValueError, match="specified dtype float64 and found dtype float32"):
            tf.get_variable("v", dtype=tf.float64)
    with tf.variable_scope("s"):
        with pytest.raises(ValueError, match="Variable s/v already exists, disallowed"):
            tf.get_variable("v", [2, 3])


def test_reuse_variables_auto_reuse_and_scope_objects():
    with tf.variable_scope("model") as scope:
        a = tf.get_variable("a", [1])
        scope.reuse_variables()
        assert tf.get_variable("a") is a
    with tf.variable_scope(scope, reuse=True):  # re-entering by object
        assert tf.get_variable("a") is a

    def layer():
        with tf.variable_scope("shared", reuse=tf.AUTO_REUSE):
            return tf.get_variable("w", [2], initializer=tf.ones_initializer())
    assert layer() is layer()
    assert len([v for v in tf.global_variables() if v.name.startswith("shared/")]) == 1


def test_default_names_are_made_unique():
    names = []
    for _ in range(3):
        with tf.variable_scope(None, default_name="block"):
            names.append(tf.get_variable("k", [1]).name)
    assert names == ["block/k:0", "block_1/k:0", "block_2/k:0"]
    with pytest.raises(TypeError, match="name_or_scope is required"):
        with tf.variable_scope(None):
            pass


def test_scope_initializer_dtype_and_value_initializers():
    with tf.variable_scope("init", initializer=tf.constant_initializer(7.0)):
        a = tf.get_variable("a", [2])
        b = tf.get_variable("b", [2], initializer=tf.zeros_initializer())
    c = tf.get_variable("c", initializer=np.array([[1.0, 2.0]], np.float32))
    d = tf.get_variable("d", initializer=tf.constant([1, 2]))
    e = tf.get_variable("e", [3], dtype=tf.int32)  # integers default to zeros
    f = tf.get_variable("f", [4, 5])  # floats default to Glorot uniform
    got = init_and_run([a, b, c, d, e, f])
    np.testing.assert_array_equal(got[0], [7, 7])
    np.testing.assert_array_equal(got[1], [0, 0])
    np.testing.assert_array_equal(got[2], [[1, 2]])
    assert d.dtype is tf.int32 and got[3].tolist() == [1, 2]
    assert got[4].dtype == np.int32 and not got[4].any()
    assert np.all(np.abs(got[5]) <= np.sqrt(6 / 9)) and got[5].std() > 0
    with pytest.raises(ValueError, match=r"Shape of a new variable \(g\) must be fully defined"):
        tf.get_variable("g")
    with pytest.raises(ValueError, match="does not match the given shape"):
        tf.get_variable("h", [3], initializer=np.zeros(2, np.float32))


def test_initializers_against_closed_forms():
    shape = [200, 300]
    tf.set_random_seed(1)
    inits = {
        "zeros": tf.zeros_initializer(), "ones": tf.ones_initializer(),
        "const": tf.constant_initializer(np.arange(6).reshape(2, 3)),
        "normal": tf.random_normal_initializer(1.0, 2.0),
        "trunc": tf.truncated_normal_initializer(0.0, 0.5),
        "uniform": tf.random_uniform_initializer(-3.0, 1.0),
        "glorot": tf.glorot_uniform_initializer(),
        "glorot_n": tf.glorot_normal_initializer(),
        "vs": tf.variance_scaling_initializer(2.0, "fan_in", "untruncated_normal"),
    }
    t = {k: i([2, 3] if k == "const" else shape) for k, i in inits.items()}
    got = init_and_run(t)
    assert not got["zeros"].any() and np.all(got["ones"] == 1)
    np.testing.assert_array_equal(got["const"], np.arange(6).reshape(2, 3))
    assert abs(got["normal"].mean() - 1.0) < 0.03 and abs(got["normal"].std() - 2.0) < 0.03
    assert np.abs(got["trunc"]).max() <= 1.0 and abs(got["trunc"].std() - 0.44) < 0.01
    assert got["uniform"].min() >= -3 and got["uniform"].max() < 1
    lim = np.sqrt(6.0 / (200 + 300))  # Glorot: limit sqrt(6 / (fan_in + fan_out))
    assert np.abs(got["glorot"]).max() <= lim and abs(got["glorot"].std() - lim / np.sqrt(3)) < 1e-3
    assert abs(got["glorot_n"].std() - np.sqrt(2.0 / 500)) < 2e-3
    assert abs(got["vs"].std() - np.sqrt(2.0 / 200)) < 2e-3
    o = init_and_run([tf.orthogonal_initializer(2.0)([3, 5]),
                      tf.orthogonal_initializer()([2, 3, 2])])
    np.testing.assert_allclose(o[0] @ o[0].T, 4 * np.eye(3), atol=1e-5)  # rows orthogonal
    flat = o[1].reshape(6, 2)
    np.testing.assert_allclose(flat.T @ flat, np.eye(2), atol=1e-5)  # columns orthonormal
    with pytest.raises(tf.errors.InvalidArgumentError, match="cannot fill"):
        tf.constant_initializer([1, 2, 3])([2, 2])
    with pytest.raises(tf.errors.InvalidArgumentError, match="invalid mode"):
        tf.variance_scaling_initializer(mode="fan_sideways")


def test_regularizers_and_custom_getter():
    def l2(w):
        return 0.5 * tf.reduce_sum(w * w)
    with tf.variable_scope("r", regularizer=l2):
        w = tf.get_variable("w", initializer=np.array([1.0, 2.0], np.float32))
    (reg,) = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert init_and_run(reg) == 2.5

    calls = []

    def getter(next_getter, name, *args, **kwargs):
        calls.append(name)
        return next_getter(name, *args, **kwargs)
    with tf.variable_scope("cg", custom_getter=getter):
        tf.get_variable("v", [1])
    assert calls == ["cg/v"]


def test_collections_and_local_variables():
    hidden = tf.Variable(1.0, collections=[])  # TF: kept out of GLOBAL_VARIABLES
    untrained = tf.Variable(2.0, trainable=False)
    local = tf.get_local_variable("counter", [], initializer=tf.zeros_initializer())
    own = tf.Variable(3.0, collections=["mine"], trainable=False)
    assert hidden not in tf.global_variables() and hidden in tf.trainable_variables()
    assert untrained in tf.global_variables() and untrained not in tf.trainable_variables()
    assert tf.local_variables() == [local] and local not in tf.global_variables()
    assert tf.get_collection("mine") == [own] and tf.GraphKeys.VARIABLES == "variables"
    with tf.variable_scope("gen"):
        gv = tf.get_variable("w", [1])
    assert tf.trainable_variables(scope="gen") == [gv] == tf.global_variables("gen")
    assert tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="gen") == [gv]
    tf.add_to_collection("things", 1)
    tf.get_collection_ref("things").append(2)
    assert tf.get_collection("things") == [1, 2]
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        assert s.run(local) == 0.0
        with pytest.raises(tf.errors.FailedPreconditionError):
            s.run(untrained)


def test_partitioned_variable_and_embedding_lookup():
    table = np.arange(30, dtype=np.float32).reshape(10, 3)
    with tf.variable_scope("emb", partitioner=tf.fixed_size_partitioner(3)):
        pv = tf.get_variable("table", initializer=tf.constant_initializer(table),
                             shape=[10, 3])
    parts = list(pv)
    assert [p.name for p in parts] == ["emb/table/part_0:0", "emb/table/part_1:0",
                                       "emb/table/part_2:0"]
    assert [p.shape.as_list() for p in parts] == [[4, 3], [3, 3], [3, 3]]  # TF's layout
    ids = np.array([9, 0, 4, 5, 3])
    got = init_and_run([tf.convert_to_tensor(pv),
                        tf.nn.embedding_lookup(pv, ids, partition_strategy="div")] + parts)
    np.testing.assert_array_equal(got[0], table)
    np.testing.assert_array_equal(got[1], table[ids])
    np.testing.assert_array_equal(np.concatenate(got[2:]), table)
    with tf.variable_scope("emb", reuse=True):
        assert tf.get_variable("table") is pv
    # the gradient stays sparse per part and a trainer updates the parts
    loss = tf.reduce_sum(tf.nn.embedding_lookup(pv, [9, 9, 1], partition_strategy="div"))
    step = tf.train.GradientDescentOptimizer(1.0).minimize(loss, var_list=[pv])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(step)
        after = s.run(tf.convert_to_tensor(pv))
    want = table.copy()
    want[9] -= 2
    want[1] -= 1
    np.testing.assert_array_equal(after, want)


def test_partitioners():
    shape = tf.TensorShape([1000, 4])
    assert tf.fixed_size_partitioner(5)(shape=shape, dtype=tf.float32) == [5, 1]
    assert tf.fixed_size_partitioner(5, axis=1)(shape=shape, dtype=tf.float32) == [1, 4]
    # 16000 bytes, at least 4096 per part -> 3 parts
    assert tf.min_max_variable_partitioner(8, min_slice_size=4096)(
        shape=shape, dtype=tf.float32) == [3, 1]
    # slices of 16 bytes, at most 1600 bytes a part -> 100 rows a part -> 10 parts
    assert tf.variable_axis_size_partitioner(1600)(shape=shape, dtype=tf.float32) == [10, 1]

    def bad(shape, dtype):
        return [2, 2]
    with pytest.raises(ValueError, match="at most one above 1"):
        tf.get_variable("x", [4, 4], partitioner=bad)


def test_partitioned_variable_over_ps_tasks_and_mod_lookup():
    table = np.arange(22, dtype=np.float32).reshape(11, 2)
    with tf.device(tf.train.replica_device_setter(ps_tasks=2,
                                                  worker_device="/job:worker/task:0")):
        with tf.variable_scope("ps", partitioner=tf.fixed_size_partitioner(2)):
            pv = tf.get_variable("emb", [11, 2], initializer=tf.constant_initializer(table))
        ids = tf.constant([10, 3, 4, 0])
        mod = tf.nn.embedding_lookup(pv, ids, partition_strategy="mod")
        div = tf.nn.embedding_lookup(pv, ids, partition_strategy="div")
    assert isinstance(pv, tf.train.PartitionedVariable)  # one class: tv.train's, with TF's API
    devices = sorted(p.device for p in pv)
    assert devices[0].startswith("/job:ps/") and "task:0" in devices[0] and "task:1" in devices[1]
    got_mod, got_div, parts = init_and_run([mod, div, list(pv)])
    np.testing.assert_array_equal(got_div, table[[10, 3, 4, 0]])
    # "mod": id i is row i // 2 of part i % 2 (of the parts as they are)
    want = [parts[i % 2][i // 2] for i in (10, 3, 4, 0)]
    np.testing.assert_array_equal(got_mod, want)


def test_a_read_under_control_dependencies_sees_the_update():
    v = tf.Variable(1.0)
    with tf.control_dependencies([v.assign_add(1.0)]):
        after = v.read_value()  # TF 1.x: "can be different from value() ... with control deps"
    with tf.Session() as s:
        s.run(v.initializer)
        assert s.run(after) == 2.0


def test_ops_made_under_control_dependencies_read_variables_after_them():
    """TF 1.x reads a variable when the consuming op runs: identity(v), v + 0 and a matmul
    made under control_dependencies([update]) all see the update, every run; ops made outside
    read the variable's own op; gradients pass through the fresh reads."""
    v = tf.Variable(1.0)
    w = tf.Variable(np.eye(2, dtype=np.float32))
    up = v.assign_add(1.0)
    before = tf.identity(v)
    with tf.control_dependencies([up]):
        ident, plus, rv = tf.identity(v), v + 0.0, v.read_value()
        prod = tf.matmul(tf.ones([1, 2]), w) * v
    grad = tf.gradients(prod, [v, w])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run([ident, plus, rv]) == [2.0, 2.0, 2.0]
        assert s.run([ident, plus]) == [3.0, 3.0]  # each run updates again, then reads
        got_prod, (gv, gw) = s.run([prod, grad])
        np.testing.assert_allclose(got_prod, [[4.0, 4.0]])
        assert gv == 2.0  # d(sum(ones @ w) * v)/dv with w = I
        np.testing.assert_allclose(gw, np.full((2, 2), 4.0))
        assert s.run(before) == 4.0  # no update in its step
    assert ident.op.inputs[0].op.type == "VariableRead"
    assert before.op.inputs[0].op.type == "VariableV2"

