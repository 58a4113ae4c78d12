"""tv.py_func: plain Python/NumPy functions as ops — outputs, statefulness (never folded),
errors raised by the function and by its results (naming the op), gradients (none unless
``grad=`` is given) and shipping the function to Dask worker processes."""
from __future__ import annotations

import cloudpickle
import numpy as np
import pytest

import tensorvm as tv
from tests.opcheck import check_gradients, run


def test_single_and_multiple_outputs():
    x = tv.constant([[1.0, 2.0], [3.0, 4.0]])
    y = tv.py_func(lambda a: a * 2, [x], tv.float32)
    s, n, w = tv.py_func(lambda a: (a.sum(axis=1), np.int64(a.size), a.T), [x],
                         [tv.float32, tv.int64, tv.float32])
    (only,) = tv.py_func(lambda a: [a + 1], [x], [tv.float32])
    assert y.dtype == tv.float32 and y.shape.ndims is None  # unknown shape, as in TF
    assert n.dtype == tv.int64
    got = run([y, s, n, w, only])
    np.testing.assert_array_equal(got[0], [[2, 4], [6, 8]])
    np.testing.assert_array_equal(got[1], [3, 7])
    assert got[2] == 4 and got[2].dtype == np.int64
    np.testing.assert_array_equal(got[3], [[1, 3], [2, 4]])
    np.testing.assert_array_equal(got[4], [[2, 3], [4, 5]])


def test_no_inputs_python_values_and_empty_tout():
    calls = []
    g = tv.Graph()
    with g.as_default():
        k = tv.py_func(lambda: 2.5, [], tv.float64)
        lst = tv.py_func(lambda: np.array([[1, 2], [3, 4]], np.int32), [], tv.int32)
        # As in TF, a returned list or tuple is a list of outputs, one per Tout entry.
        two = tv.py_func(lambda: [1, 2], [], tv.int32, name="two_values")
        op = tv.py_func(lambda v: calls.append(v.copy()), [tv.constant([1, 2])], [])
        assert isinstance(op, tv.Operation)
        with tv.Session(graph=g) as sess:
            kv, lv = sess.run([k, lst])
            sess.run(op)
            with pytest.raises(tv.errors.InvalidArgumentError, match="returned 2 values"):
                sess.run(two)
    assert kv == 2.5 and kv.dtype == np.float64
    assert lv.dtype == np.int32 and lv.shape == (2, 2)
    assert len(calls) == 1 and list(calls[0]) == [1, 2]


def test_strings_in_and_out():
    words = tv.constant(["b", "a", "c"])
    out = tv.py_func(lambda w: np.array(sorted(w)), [words], tv.string)
    n = tv.py_func(lambda w: np.int32(len("".join(w))), [words], tv.int32)
    got = run([out, n])
    assert got[0].dtype == object and list(got[0]) == ["a", "b", "c"] and got[1] == 3


@pytest.mark.parametrize("stateful", [True, False])
def test_py_func_is_never_constant_folded(stateful):
    calls = []

    def f(a):
        calls.append(1)
        return a + np.float32(len(calls))

    g = tv.Graph()
    with g.as_default():
        y = tv.py_func(f, [tv.constant(1.0)], tv.float32, stateful=stateful)
        with tv.Session(graph=g) as sess:
            assert sess.plan(y).kernels >= 1
            assert [float(sess.run(y)) for _ in range(3)] == [2.0, 3.0, 4.0]
    assert len(calls) == 3


def test_stateful_calls_are_not_merged_but_stateless_ones_may_be():
    calls = {"n": 0}

    def f(a):
        calls["n"] += 1
        return a

    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [])
        a = tv.py_func(f, [x], tv.float32)
        b = tv.py_func(f, [x], tv.float32)
        with tv.Session(graph=g) as sess:
            sess.run([a, b], {x: 1.0})
    assert calls["n"] == 2


def test_inputs_are_read_only():
    def inplace(a):
        a += 1
        return a

    x = tv.constant([1.0, 2.0])
    y = tv.py_func(inplace, [x], tv.float32, name="inplace")
    with pytest.raises(tv.errors.InvalidArgumentError, match=r"(?s)read-only.*'inplace'"):
        run(y)
    # Copying first works, and the constant is untouched.
    z = tv.py_func(lambda a: a.copy() + 1, [x], tv.float32)
    np.testing.assert_array_equal(run([z, x])[1], [1.0, 2.0])


def test_errors_raised_by_the_function_name_the_op():
    def bad_value(a):
        raise ValueError("negative input")

    def crash(a):
        raise RuntimeError("boom")

    x = tv.constant([1.0])
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"(?s)negative input.*'checker' \(PyFunc\).*test_py_func.py") as e:
        run(tv.py_func(bad_value, [x], tv.float32, name="checker"))
    assert isinstance(e.value.__cause__, ValueError)
    with pytest.raises(tv.errors.UnknownError, match=r"(?s)RuntimeError: boom.*'crasher'") as e:
        run(tv.py_func(crash, [x], tv.float32, name="crasher"))
    assert isinstance(e.value.__cause__, RuntimeError)


def test_stop_iteration_and_not_implemented_map_as_in_tf():
    it = iter([np.float32(1.0)])
    x = tv.py_func(lambda: next(it), [], tv.float32, name="reader")
    todo = tv.py_func(lambda: (_ for _ in ()).throw(NotImplementedError("later")), [],
                      tv.float32, name="todo")
    g = x.graph
    with tv.Session(graph=g) as sess:
        assert sess.run(x) == 1.0
        with pytest.raises(tv.errors.OutOfRangeError, match=r"(?s)StopIteration.*'reader'"):
            sess.run(x)
        with pytest.raises(tv.errors.UnimplementedError, match=r"(?s)later.*'todo'"):
            sess.run(todo)


def test_output_dtype_and_count_mismatch():
    x = tv.constant([1.0, 2.0])
    wrong = tv.py_func(lambda a: a.astype(np.float64), [x], tv.float32, name="wrong_dtype")
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"(?s)float64 but expects float32.*'wrong_dtype'"):
        run(wrong)
    count = tv.py_func(lambda a: (a, a), [x], [tv.float32, tv.float32, tv.float32],
                       name="wrong_count")
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"(?s)returned 2 values, expected 3.*'wrong_count'"):
        run(count[0])
    not_num = tv.py_func(lambda a: "text", [x], tv.float32, name="not_a_number")
    with pytest.raises(tv.errors.InvalidArgumentError, match=r"(?s)float32.*'not_a_number'"):
        run(not_num)


def test_construction_errors():
    with pytest.raises(tv.errors.InvalidArgumentError, match="callable"):
        tv.py_func(42, [], tv.float32)
    with pytest.raises(tv.errors.InvalidArgumentError, match="Tout"):
        tv.py_func(lambda: 1, [], "no-such-dtype")


def test_no_gradient_unless_given():
    x = tv.constant([1.0, 2.0])
    y = tv.py_func(np.square, [x], tv.float32, name="sq")
    # 'sq' or 'sq_<n>': the default graph is shared with earlier tests
    with pytest.raises(tv.errors.NotFoundError, match=r"no gradient.*'sq(_\d+)?'"):
        tv.gradients(tv.reduce_sum(y), x)
    assert tv.gradients(tv.reduce_sum(tv.stop_gradient(y) + x), x)[0] is not None


def test_grad_extension_with_numpy_and_tv_ops():
    def numpy_grad(op, g):
        return [tv.py_func(lambda a, b: 3 * a * a * b, [op.inputs[0], g], tv.float64), None]

    def cube(a, b):  # py_func outputs have unknown shape: give the check a static one
        return tv.reshape(tv.py_func(lambda u, v: u ** 3 + v, [a, b], tv.float64,
                                     grad=numpy_grad), [3])

    check_gradients(cube, np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, 3.0]), wrt=[0])

    def sincos(a):  # a gradient built from tv ops, for a py_func of two outputs
        s, c = tv.py_func(lambda u: (np.sin(u), np.cos(u)), [a], [tv.float64, tv.float64],
                          grad=lambda op, g0, g1: [g0 * tv.cos(op.inputs[0])
                                                   - g1 * tv.sin(op.inputs[0])])
        return tv.reshape(s * 2.0 + c, [2])

    check_gradients(sincos, np.array([0.1, 1.2]))


def test_graph_def_refuses_a_py_func():
    g = tv.Graph()
    with g.as_default():
        tv.py_func(lambda a: a, [tv.constant(1.0)], tv.float32)
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"op 'PyFunc' \(PyFunc\), attr 'func': it calls a Python "
                                 r"function .* cannot be exported"):
            g.as_graph_def()


def test_function_travels_with_cloudpickle():
    scale = np.float32(3.0)  # a closure over local state, as users write them
    g = tv.Graph()
    with g.as_default():
        y = tv.py_func(lambda a: a * scale, [tv.constant([1.0, 2.0])], tv.float32)
        from tensorvm.framework.op_registry import registry
        attrs = cloudpickle.loads(cloudpickle.dumps(y.op.attrs))
        out = registry["PyFunc"].kernels["CPU"](np.array([1.0, 2.0], np.float32), **attrs)
    np.testing.assert_array_equal(out, [3.0, 6.0])


@pytest.mark.cluster
def test_py_func_on_dask_worker_processes():
    offset = 10.0
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float64, [None])
        y = tv.py_func(lambda a: a + offset, [x], tv.float64)
        with tv.Session("local", verbose=False) as sess:
            np.testing.assert_array_equal(sess.run(y, {x: np.arange(3.0)}), [10, 11, 12])
