"""TF 1.x framework helpers: RegisterGradient + gradient_override_map, NotDifferentiable,
custom_gradient, py_function, tf.print, make_template."""
from __future__ import annotations

import numpy as np
import pytest

import tensorvm as tv
from tests.opcheck import check_gradients


@pytest.fixture
def g():
    with tv.Graph().as_default() as graph:
        yield graph


def test_gradient_override_map_with_a_registered_and_an_op_types_gradient(g):
    @tv.RegisterGradient("TestGuidedRelu")
    def _guided(op, grad):
        return [tv.where(grad > 0.0, grad, tv.zeros_like(grad)) *
                tv.cast(op.outputs[0] > 0.0, grad.dtype)]
    x = tv.constant([-1.0, 2.0, 3.0])
    with g.gradient_override_map({"Relu": "TestGuidedRelu", "Round": "Identity"}):
        y = tv.nn.relu(x)
        r = tv.round(x * 0.4)  # straight-through: Round with Identity's gradient
    plain = tv.nn.relu(x)
    w = tv.constant([1.0, -1.0, 2.0])
    with tv.Session() as s:
        guided, ste, normal = s.run([tv.gradients(tf_sum(y * w), x)[0],
                                     tv.gradients(tf_sum(r * w), x)[0],
                                     tv.gradients(tf_sum(plain * w), x)[0]])
    assert guided.tolist() == [0.0, 0.0, 2.0]     # negative upstream gradients dropped
    assert normal.tolist() == [0.0, -1.0, 2.0]
    np.testing.assert_allclose(ste, [0.4, -0.4, 0.8])
    with pytest.raises(KeyError, match="Registering two gradient with name 'TestGuidedRelu'"):
        tv.RegisterGradient("TestGuidedRelu")(_guided)
    with g.gradient_override_map({"Neg": "NoSuchGradient"}):
        n = -x
    with pytest.raises(LookupError, match="No gradient defined .*NoSuchGradient"):
        tv.gradients(n, x)
    with pytest.raises(TypeError, match="op_type_map must be a dictionary"):
        with g.gradient_override_map({"Relu": 3}):
            pass


def tf_sum(t):
    return tv.reduce_sum(t)


def test_not_differentiable_gives_none(g):
    from tensorvm.framework.op_registry import register_op
    register_op("TestNoGradOp", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
                lambda x: x * 2)
    tv.NotDifferentiable("TestNoGradOp")
    from tensorvm.framework.op_def_library import apply_op
    x = tv.constant([1.0])
    y = apply_op("TestNoGradOp", [x]).outputs[0]
    assert tv.gradients(y, x) == [None]


def test_custom_gradient_replaces_the_gradient(g):
    @tv.custom_gradient
    def log1pexp(x):
        e = tv.exp(x)
        return tv.log(1 + e), lambda dy: dy * (1 - 1 / (1 + e))
    x = tv.constant([0.0, 100.0])
    y = log1pexp(x)
    with tv.Session() as s:
        val, grad = s.run([y, tv.gradients(tv.reduce_sum(y), x)[0]])
    np.testing.assert_allclose(val[0], np.log(2.0))  # val[1] overflows float32, as in TF
    np.testing.assert_allclose(grad, [0.5, 1.0])  # finite where the plain one is NaN
    check_gradients(lambda t: log1pexp(t), np.array([0.3, -1.2]))

    @tv.custom_gradient
    def two_grads(a, b):
        return a * b, lambda dy: (dy * 10.0, None)
    a, b = tv.constant(2.0), tv.constant(3.0)
    ga, gb = tv.gradients(two_grads(a, b), [a, b])
    assert gb is None
    with tv.Session() as s:
        assert s.run(ga) == 10.0

    @tv.custom_gradient
    def wrong(a):
        return a * 1.0, lambda dy: (dy, dy)
    with pytest.raises(ValueError, match="returned 2 gradients for 1 inputs"):
        tv.gradients(wrong(a), a)


def test_py_function_hands_eager_like_values(g):
    def f(x, y):
        return x.numpy() * 2 + y.numpy()
    out = tv.py_function(f, [tv.constant([1.0, 2.0]), tv.constant(1.0)], tv.float32)
    with tv.Session() as s:
        assert s.run(out).tolist() == [3.0, 5.0]


def test_tf_print_writes_formatted_values(g, capsys, tmp_path):
    x = tv.constant([[1, 2], [3, 4]])
    p = tv.print("x:", x, "sum", tv.reduce_sum(x), sep="|")
    path = tmp_path / "log.txt"
    to_file = tv.print("value", tv.constant(7), output_stream=f"file://{path}")
    import sys
    to_out = tv.print("out", output_stream=sys.stdout, end="!\n")
    with tv.Session() as s:
        s.run([p, to_file, to_out])
    captured = capsys.readouterr()
    assert captured.err == "x:|[[1 2]\n [3 4]]|sum|10\n"
    assert captured.out == "out!\n"
    assert path.read_text() == "value 7\n"
    with pytest.raises(ValueError, match="Unsupported output stream"):
        tv.print("x", output_stream=42)


def test_make_template_shares_variables(g):
    def layer(x):
        w = tv.get_variable("w", [2, 2], initializer=tv.ones_initializer())
        return tv.matmul(x, w)
    tmpl = tv.make_template("my_layer", layer)
    a = tmpl(tv.ones([1, 2]))
    b = tmpl(tv.ones([1, 2]) * 2.0)
    assert [v.op.name for v in tv.global_variables()] == ["my_layer/w"]
    assert [v.op.name for v in tmpl.variables] == ["my_layer/w"]
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        assert s.run(a).tolist() == [[2.0, 2.0]] and s.run(b).tolist() == [[4.0, 4.0]]
    other = tv.make_template("my_layer", layer)
    other(tv.ones([1, 2]))
    assert "my_layer_1/w" in [v.op.name for v in tv.global_variables()]

    def bad(x):
        return x + tv.Variable(1.0)
    t2 = tv.make_template("bad", bad)
    t2(tv.constant(1.0))
    with pytest.raises(ValueError, match="variable created when calling a template after"):
        t2(tv.constant(1.0))


def test_print_format_is_tfs():
    """As TF 2.21's tf.print writes these (checked by hand against it)."""
    from tensorvm.tf_api.framework_api import format_tensor
    assert format_tensor(np.arange(24).reshape(2, 3, 4)) == (
        "[[[0 1 2 3]\n  [4 5 6 7]\n  [8 9 10 11]]\n\n [[12 13 14 15]\n  [16 17 18 19]\n"
        "  [20 21 22 23]]]")
    assert format_tensor(np.array([1.0, 2.5, 0.1], np.float32)) == "[1 2.5 0.1]"
    assert format_tensor(np.arange(10)) == "[0 1 2 ... 7 8 9]"
    assert format_tensor(np.arange(10), summarize=-1) == "[0 1 2 3 4 5 6 7 8 9]"
    assert format_tensor(np.array(["a", "b"], dtype=object)) == '["a" "b"]'
    assert format_tensor(np.array(b"abc", dtype=object)) == "abc"
    assert format_tensor(np.array(True)) == "1"
