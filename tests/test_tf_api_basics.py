"""Issue 14, items 1, 2 and 4: TF 1.x dtype names and Python-value dtypes, the dtype-mismatch
error (naming the op and the user's line), ``tf.app``/``tf.app.flags``, deprecated aliases and
``tf.compat``. Each checked against NumPy or the value TF gives."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import tensorvm as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default() as g:
        yield g


def run(fetches, feed=None):
    with tf.Session() as s:
        return s.run(fetches, feed)


# ---- item 1: dtypes ---------------------------------------------------------------------------
def test_float_means_float32_as_in_tf():
    assert tf.as_dtype("float") is tf.float32
    assert tf.as_dtype(float) is tf.float32
    assert tf.as_dtype("double") is tf.float64 and tf.as_dtype("half") is tf.float16
    assert tf.as_dtype(np.float64) is tf.float64  # a NumPy dtype keeps its width
    x = tf.placeholder("float", [None, 3])
    w = tf.Variable(tf.zeros([3, 2], dtype=tf.float32))
    y = tf.matmul(x, w)  # the TF 1.x tutorial idiom: builds, computes in float32
    assert x.dtype is tf.float32 and y.dtype is tf.float32
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        out = s.run(y, {x: np.ones((2, 3))})
    assert out.dtype == np.float32 and out.shape == (2, 2)
    assert tf.cast(tf.constant(1), "float").dtype is tf.float32
    assert tf.zeros([2], dtype="float").dtype is tf.float32


def test_python_values_become_float32_and_int32():
    assert tf.constant(1.5).dtype is tf.float32
    assert tf.constant([1, 2]).dtype is tf.int32
    assert tf.Variable(0.5).dtype is tf.float32
    assert tf.constant(np.float64(1.0)).dtype is tf.float64  # NumPy values keep theirs
    v = tf.Variable(2.0)
    y = v * 3 + 1  # Python operands take the tensor's dtype
    with tf.Session() as s:
        s.run(v.initializer)
        assert s.run(y) == np.float32(7.0)


def test_dtype_mismatch_names_the_op_and_the_users_line():
    a = tf.constant([[1.0]], dtype=tf.float64)
    w = tf.Variable([[2.0]])
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        tf.matmul(a, w, name="my_matmul")
    msg = str(e.value)
    assert "my_matmul" in msg and "MatMul" in msg
    assert "float64" in msg and "float32" in msg
    assert f"{__file__}:" in msg  # the line of this test that built the op
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"'add_it' \(Add\).*test_tf_api"):
        tf.add(w, a, name="add_it")


# ---- item 2: tf.app and flags -----------------------------------------------------------------
def test_app_flags_define_parse_and_run():
    flags = tf.app.flags
    flags.DEFINE_string("t14_data_dir", "/tmp/data", "where the data is")
    flags.DEFINE_integer("t14_steps", 10, "steps")
    flags.DEFINE_float("t14_lr", 0.5, "learning rate")
    flags.DEFINE_boolean("t14_fake", False, "fake data")
    FLAGS = flags.FLAGS
    seen = {}

    def main(argv):
        seen.update(argv=argv, dir=FLAGS.t14_data_dir, steps=FLAGS.t14_steps, lr=FLAGS.t14_lr,
                    fake=FLAGS.t14_fake)
        return 0

    with pytest.raises(SystemExit) as e:
        tf.app.run(main, argv=["prog", "--t14_steps=5", "--t14_lr", "0.25", "--t14_fake",
                               "rest"])
    assert e.value.code == 0
    assert seen == {"argv": ["prog", "rest"], "dir": "/tmp/data", "steps": 5, "lr": 0.25,
                    "fake": True}
    assert tf.flags.FLAGS.t14_steps == 5  # tf.flags is tf.app.flags
    with pytest.raises(SystemExit, match="t14_steps"):
        tf.app.run(main, argv=["prog", "--t14_steps=many"])


def test_flags_parse_sys_argv_on_first_read(monkeypatch):
    tf.app.flags.DEFINE_integer("t14_lazy", 1, "read before app.run")
    fv = tf.app.flags.FLAGS
    fv.__dict__["_fv"].unparse_flags()
    monkeypatch.setattr(sys, "argv", ["prog", "--t14_lazy=42", "--not_a_flag_of_ours=1"])
    assert fv.t14_lazy == 42
    assert fv._parse_flags(["prog", "--t14_lazy=7", "x"]) == ["prog", "x"]  # TF <= 1.4's call
    assert fv.t14_lazy == 7
    with pytest.raises(AttributeError):
        fv.t14_never_defined


# ---- item 4: deprecated aliases and compat ----------------------------------------------------
def test_deprecated_reduction_arguments():
    x = np.array([[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]], np.float32)
    got = run([tf.reduce_sum(x, reduction_indices=[1]),
               tf.reduce_mean(x, reduction_indices=0, keep_dims=True),
               tf.reduce_max(x, reduction_indices=1, keep_dims=True),
               tf.nn.softmax(x, dim=0),
               tf.expand_dims(x, dim=0),
               tf.argmax(x, dimension=1)])
    np.testing.assert_allclose(got[0], x.sum(1))
    np.testing.assert_allclose(got[1], x.mean(0, keepdims=True))
    np.testing.assert_allclose(got[2], x.max(1, keepdims=True))
    e = np.exp(x - x.max(0))
    np.testing.assert_allclose(got[3], e / e.sum(0), rtol=1e-6)
    assert got[4].shape == (1, 2, 3)
    np.testing.assert_array_equal(got[5], [2, 2])


def test_deprecated_function_aliases():
    x = np.array([[3.0, -1.0, 2.0]], np.float32)
    got = run([tf.arg_max(x, 1), tf.arg_min(x, 1), tf.to_float(tf.constant([1, 2])),
               tf.to_int32(tf.constant([1.7, -2.2])), tf.to_int64(tf.constant([3])),
               tf.to_double(tf.constant([0.5])), tf.mul(x, 2.0), tf.sub(x, 1.0), tf.neg(x)])
    np.testing.assert_array_equal(got[0], [0])
    np.testing.assert_array_equal(got[1], [1])
    assert got[2].dtype == np.float32 and got[3].dtype == np.int32
    np.testing.assert_array_equal(got[3], [1, -2])  # truncation, as TF's cast
    assert got[4].dtype == np.int64 and got[5].dtype == np.float64
    np.testing.assert_allclose(got[6], x * 2)
    np.testing.assert_allclose(got[7], x - 1)
    np.testing.assert_allclose(got[8], -x)


def test_initialize_all_variables_and_compat():
    v = tf.Variable(3.0)
    with tf.Session() as s:
        s.run(tf.initialize_all_variables())
        assert s.run(v) == 3.0
    assert tf.all_variables() == [v]
    assert tf.compat.v1 is tf
    assert tf.compat.v1.placeholder is tf.placeholder
    assert tf.compat.as_bytes("é") == "é".encode() and tf.compat.as_str(b"\xc3\xa9") == "é"
    assert tf.compat.as_text("x") == "x" and tf.compat.as_str_any(3) == "3"
    with pytest.raises(TypeError, match="Expected binary or unicode string"):
        tf.compat.as_bytes(3)
    tf.compat.v1.disable_eager_execution()
    assert tf.executing_eagerly() is False
    with pytest.raises(tf.errors.UnimplementedError, match="graphs only"):
        tf.enable_eager_execution()


def test_graph_collections_by_scope_keys_and_clear():
    """TF 1.x's ``graph.get_collection(key, scope=...)`` (GANs pick each network's variables
    so), ``get_all_collection_keys`` and ``clear_collection`` were missing on the Graph."""
    g = tf.Graph()
    with g.as_default():
        with tf.variable_scope("gen"):
            a = tf.get_variable("w", [1])
        with tf.variable_scope("disc"):
            b = tf.get_variable("w", [1])
        tf.add_to_collection("extra", 3)
    assert g.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="disc") == [b]
    with g.as_default():
        assert tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="gen") == [a]
    assert {"extra", tf.GraphKeys.TRAINABLE_VARIABLES} <= set(g.get_all_collection_keys())
    g.clear_collection("extra")
    assert g.get_collection("extra") == [] and "extra" not in g.get_all_collection_keys()


# ---- tf.errors codes and TF's constructor; the rest of absl's flags -----------------------------
def test_errors_codes_and_tf_constructor():
    import tensorvm as tv
    e = tv.errors.OutOfRangeError(None, None, "end of data")  # TF's (node_def, op, message)
    assert str(e) == "end of data" and e.message == "end of data" and e.op is None
    assert isinstance(tv.errors.PermissionDeniedError("no"), tv.errors.OpError)
    codes = {"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
             "NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7,
             "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9, "ABORTED": 10,
             "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
             "DATA_LOSS": 15, "UNAUTHENTICATED": 16}
    for name, code in codes.items():
        assert getattr(tv.errors, name) == code
        if code:
            cls = tv.errors.exception_type_from_error_code(code)
            assert cls.error_code == code
            assert tv.errors.error_code_from_exception_type(cls) == code
    with pytest.raises(KeyError, match="no error class for error code 99"):
        tv.errors.exception_type_from_error_code(99)


def test_flags_has_absls_validators():
    import tensorvm as tv
    fv = tv.flags.FlagValues()
    tv.flags.DEFINE_integer("steps", 5, "steps", flag_values=fv)
    tv.flags.register_validator("steps", lambda v: v > 0, message="steps must be positive",
                                flag_values=fv)
    fv(["prog", "--steps=3"])
    assert fv.steps == 3
    with pytest.raises(tv.flags.IllegalFlagValueError, match="steps must be positive"):
        fv(["prog", "--steps=-1"])


def test_add_n_of_one_named_input_is_an_op_of_that_name():
    """TF: add_n([x], name=...) is an identity of that name (CIFAR-10's total_loss summary and
    its moving average would otherwise fold into the cross-entropy's)."""
    import tensorvm as tv
    x = tv.constant([1.0, 2.0], name="xent")
    total = tv.add_n([x], name="total_loss")
    assert total.op.name == "total_loss" and total.op.type == "Identity"
    assert tv.add_n([x]) is x
    with tv.Session() as s:
        assert s.run(total).tolist() == [1.0, 2.0]
        assert s.run(tv.add_n([x, x, x])).tolist() == [3.0, 6.0]
    with pytest.raises(ValueError, match="inputs must be a list of at least one"):
        tv.add_n([])
