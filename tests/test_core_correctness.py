"""Regression tests for the core's correctness bugs (issue 7): conversions that must refuse
what TF refuses, per-thread default graphs and sessions, and a registry whose changes always
take effect."""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import tensorvm as tv
from tensorvm.framework.op_registry import (generation, get_op_def, register_gradient,
                                            register_kernel, register_op)


# ---- convert_to_tensor refuses what TF refuses ----------------------------------------------
@pytest.mark.parametrize("value, cls, match", [
    (object(), TypeError, "Failed to convert object of type object to Tensor"),
    ({"a": 1}, TypeError, r"Failed to convert object of type dict to Tensor. Contents: \{'a'"),
    ([1, "a"], TypeError, r"\[1, 'a'\].*mixes strings with numbers"),
    (["a", 2.5], TypeError, "mixes strings with numbers"),
    (None, ValueError, "None values not supported"),
    ([1.0, None], ValueError, "None values not supported"),
    ([[1, 2], [3]], ValueError, r"\[\[1, 2\], \[3\]\].*ragged"),
    ({1, 2}, TypeError, "type set"),
])
def test_convert_to_tensor_refuses(g, value, cls, match):
    with pytest.raises(cls, match=match):
        tv.convert_to_tensor(value)
    with pytest.raises(cls, match=match):
        tv.constant(value)
    assert len(g.get_operations()) == 0  # nothing half-built


def test_ops_refuse_unconvertible_inputs(g):
    x = tv.constant([1.0, 2.0])
    with pytest.raises(TypeError, match="type dict"):
        tv.add(x, {"a": 1})
    with pytest.raises(ValueError, match="None values not supported"):
        x + None


@pytest.mark.parametrize("value, dtype, expected", [
    ("abc", tv.string, "abc"),
    ([b"a", b"bc"], tv.string, [b"a", b"bc"]),
    (np.array(["x", "y"], dtype=object), tv.string, ["x", "y"]),
    ([[1, 2], [3, 4]], tv.int32, [[1, 2], [3, 4]]),
    ([1, 2.5], tv.float32, [1.0, 2.5]),
    (np.float64(2.0), tv.float64, 2.0),
    (True, tv.bool, True),
    ((1, 2), tv.int32, [1, 2]),
])
def test_convert_to_tensor_still_takes_plain_values(g, value, dtype, expected):
    t = tv.convert_to_tensor(value)
    assert t.dtype == dtype
    with tv.Session() as s:
        out = s.run(t)
    got = out.tolist() if isinstance(out, np.ndarray) else out
    assert got == expected


def test_indexed_slices_convert_densified_with_tf_warning(g):
    params = tv.Variable(np.arange(12.0).reshape(4, 3), name="p")
    y = tv.reduce_sum(tv.gather(params, [0, 2, 0]))
    (grad,) = tv.gradients(y, [params])
    assert isinstance(grad, tv.IndexedSlices)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dense = tv.convert_to_tensor(grad)
    assert dense.dtype == tv.float64
    with tv.Session() as s:
        s.run(params.initializer)
        got = s.run(dense)
    expected = np.zeros((4, 3))
    np.add.at(expected, [0, 2, 0], 1.0)
    np.testing.assert_array_equal(got, expected)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64
    # The dense shape comes from a Shape op (not a constant): TF warns about unknown shapes.
    assert any("Converting sparse IndexedSlices to a dense Tensor" in str(w.message)
               for w in caught)


def test_indexed_slices_in_math_are_densified(g):
    params = tv.Variable(np.ones((3, 2), np.float32), name="p")
    (grad,) = tv.gradients(tv.reduce_sum(tv.gather(params, [1])), [params])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doubled = tv.multiply(grad, 2.0)  # an op input: converted (densified)
    with tv.Session() as s:
        s.run(params.initializer)
        np.testing.assert_array_equal(s.run(doubled), [[0, 0], [2, 2], [0, 0]])


# ---- default graph and session are per thread -------------------------------------------------
def test_default_graph_is_per_thread():
    main_g, other_g = tv.Graph(), tv.Graph()
    entered, built = threading.Event(), threading.Event()
    result = {}

    def other():
        with other_g.as_default():
            entered.set()
            built.wait(10)
            result["op"] = tv.constant(2.0, name="in_thread")

    t = threading.Thread(target=other)
    t.start()
    assert entered.wait(10)
    # While the thread is inside other_g.as_default(): the main thread's default is its own.
    a = tv.constant(1.0, name="in_main")
    with main_g.as_default():
        b = tv.constant(1.0, name="in_main")
    built.set()
    t.join(10)
    assert a.graph is tv.get_default_graph() and a.graph is not other_g
    assert b.graph is main_g and [op.name for op in main_g.get_operations()] == ["in_main"]
    assert result["op"].graph is other_g
    assert [op.name for op in other_g.get_operations()] == ["in_thread"]


def test_builder_scopes_are_per_thread(g):
    inside, done = threading.Event(), threading.Event()

    def other():
        with g.as_default(), tv.name_scope("thread_scope"), tv.device("/job:ps/task:0"), \
                tv.control_dependencies([c]):
            inside.set()
            done.wait(10)

    c = tv.no_op(name="c")
    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    x = tv.constant(1.0, name="x")
    done.set()
    t.join(10)
    assert x.op.name == "x" and x.op.device == "" and x.op.control_inputs == ()


def test_default_session_is_per_thread(g):
    x = tv.constant(3.0)
    seen = {}
    with tv.Session() as s:
        assert tv.get_default_session() is s

        def other():
            seen["default"] = tv.get_default_session()
            try:
                x.eval()
            except ValueError as e:
                seen["error"] = str(e)

        t = threading.Thread(target=other)
        t.start()
        t.join(10)
        assert float(x.eval()) == 3.0
    assert seen["default"] is None
    assert "No default session is registered" in seen["error"]
    assert tv.get_default_session() is None


def test_nested_default_graphs_exit_in_order():
    g1, g2 = tv.Graph(), tv.Graph()
    with g1.as_default():
        with g2.as_default():
            assert tv.get_default_graph() is g2
        assert tv.get_default_graph() is g1
    assert tv.get_default_graph() not in (g1, g2)


# ---- the registry: changes always take effect, never silently overwritten --------------------
def test_reregistered_kernel_takes_effect(g):
    op_type = "TestRegistryTwice"
    register_op(op_type, lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
                lambda x: x + 1)
    x = tv.placeholder(tv.float64, [2])
    from tensorvm.framework.op_def_library import apply_op
    y = apply_op(op_type, [x]).outputs[0]
    with tv.Session() as s:
        np.testing.assert_array_equal(s.run(y, {x: [1.0, 2.0]}), [2.0, 3.0])
        before = generation()
        with pytest.raises(ValueError, match="already has a CPU kernel"):
            register_kernel(op_type, "CPU", lambda x: x + 100)
        register_kernel(op_type, "CPU", lambda x: x + 100, clobber=True)
        assert generation() > before
        # Same session, cached plan: the new kernel is used, not the old one.
        np.testing.assert_array_equal(s.run(y, {x: [1.0, 2.0]}), [101.0, 102.0])
    with tv.Session() as s:
        np.testing.assert_array_equal(s.run(y, {x: [0.0, 0.0]}), [100.0, 100.0])


def test_register_gradient_refuses_overwrite():
    with pytest.raises(ValueError, match="Add already has a gradient function"):
        register_gradient("Add")(lambda op, g: [g, g])
    old = get_op_def("Add").grad_fn
    register_gradient("TestRegistryTwice", clobber=True)(lambda op, g: [g])
    with pytest.raises(ValueError, match="TestRegistryTwice already has a gradient"):
        register_gradient("TestRegistryTwice")(lambda op, g: [g * 2])
    assert get_op_def("Add").grad_fn is old


def test_op_facts_live_in_the_op_table():
    assert get_op_def("Identity").pass_through and get_op_def("StopGradient").pass_through
    assert not get_op_def("Add").pass_through
    for t in ("Const", "Placeholder", "Identity", "NoOp", "VariableV2", "Assign", "Shape"):
        assert get_op_def(t).gpu_fallback, t
    assert not get_op_def("MatMul").gpu_fallback


def test_dimension_value_as_tf1_programs_read_it(g):
    x = tv.placeholder(tv.float32, [None, 784])
    assert x.get_shape()[1].value == 784 and x.get_shape()[1] == 784
    assert x.get_shape()[0] is None
    assert x.get_shape()[1:].as_list() == [784]
    assert int(x.shape[-1]) * 2 == 1568 and repr(x.shape[1]) == "Dimension(784)"
    w = tv.Variable(np.zeros((x.get_shape()[1].value, 10), np.float32))
    assert w.shape.as_list() == [784, 10]


def test_strided_slice_has_tf_signature(g):
    x = tv.placeholder(tv.uint8, [None])
    y = tv.strided_slice(x, [1], [49])
    assert y.shape.as_list() == [None]  # not a gather of index 1 (TF's begin/end, not a key)
    m = tv.constant(np.arange(24).reshape(2, 3, 4))
    cases = [
        (tv.strided_slice(m, [0, 1, 0], [2, 3, 4], [1, 1, 2]),
         np.arange(24).reshape(2, 3, 4)[0:2, 1:3, 0:4:2]),
        (tv.strided_slice(m, [1, 0], [2, 0], end_mask=2, shrink_axis_mask=1),
         np.arange(24).reshape(2, 3, 4)[1, 0:]),
        (tv.strided_slice(m, [0, 2], [0, 3], begin_mask=1, end_mask=1, ellipsis_mask=0,
                          new_axis_mask=0), np.arange(24).reshape(2, 3, 4)[:, 2:3]),
        (tv.strided_slice(m, [0, -1], [0, 0], ellipsis_mask=1, shrink_axis_mask=2),
         np.arange(24).reshape(2, 3, 4)[..., -1]),
    ]
    with tv.Session() as s:
        np.testing.assert_array_equal(s.run(y, {x: np.arange(60, dtype=np.uint8)}),
                                      np.arange(1, 49))
        for t, want in cases:
            np.testing.assert_array_equal(s.run(t), want)
    with pytest.raises(tv.errors.InvalidArgumentError, match="one length"):
        tv.strided_slice(m, [0, 1], [1])


def test_variable_built_in_colocate_with_initialises_on_that_device(g):
    with tv.device("/job:ps/task:0"):
        anchor = tv.Variable(1.0, name="anchor")
    with tv.device("/job:worker/task:0"), tv.colocate_with(anchor):
        v = tv.Variable(2.0, name="v")
    with tv.Session() as s:
        plan = s.plan(v.initializer)
        assert {t.device for t in plan.tasks} == {"/job:ps/replica:0/task:0/device:CPU:0"}
        s.run([anchor.initializer, v.initializer])
        assert float(s.run(v)) == 2.0


def test_start_queue_runners_without_a_session_says_so(g):
    with pytest.raises(ValueError, match="no session given and no default session"):
        tv.train.start_queue_runners()
