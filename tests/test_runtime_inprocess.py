"""Reliability of the in-process runtime (issue 9, issue 7 bugs 1/4/6): fetched values never
alias stored state, Ctrl-C passes through, timed-out steps really stop, bad input is a
``tv.errors`` class, numeric checks, the bounded plan cache, the ``__main__`` guard."""
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import tensorvm as tv

# ---- issue 7 bug 1: fetched values are copies --------------------------------------------------

def test_fetched_variable_is_a_copy(g):
    v = tv.Variable(np.zeros(3, np.float32), name="v")
    with tv.Session() as s:
        s.run(v.initializer)
        w = s.run(v)
        w += 100
        np.testing.assert_array_equal(s.run(v), [0, 0, 0])
        u = s.run(v.assign_add(np.ones(3, np.float32)))
        u += 100
        np.testing.assert_array_equal(s.run(v), [1, 1, 1])


def test_py_func_cannot_write_through_to_a_variable(g):
    v = tv.Variable(np.zeros(2, np.float32), name="v")

    def scribble(a):
        try:
            a.flags.writeable = True
            a += 5
        except ValueError:
            pass
        return np.float32(0)
    out = tv.py_func(scribble, [v.value()], tv.float32)
    with tv.Session() as s:
        s.run(v.initializer)
        s.run(out)
        np.testing.assert_array_equal(s.run(v), [0, 0])


# ---- issue 7 bug 4: Ctrl-C is not an UnknownError ---------------------------------------------

@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_keyboard_interrupt_and_exit_pass_through(g, exc):
    def stop(x):
        raise exc()
    y = tv.py_func(stop, [tv.constant(1.0)], tv.float32)
    with tv.Session() as s:
        with pytest.raises(exc):
            s.run(y)


# ---- item 3: a timed-out step stops ---------------------------------------------------------

def test_timed_out_step_never_applies_its_update(g):
    release = threading.Event()
    ran_on = []

    def blocked(x):
        ran_on.append(threading.current_thread())
        release.wait(30)
        return x
    v = tv.Variable(0.0, name="counter")
    gate = tv.py_func(blocked, [tv.constant(1.0)], tv.float32, name="gate")
    up = v.assign_add(gate, name="late_update")
    with tv.Session() as s:
        s.run(v.initializer)
        for _ in range(3):  # a retrying client
            with pytest.raises(tv.errors.DeadlineExceededError) as e:
                s.run(up, options=tv.RunOptions(timeout_in_ms=100))
            assert "gate" in str(e.value) and "late_update" not in str(e.value)
        release.set()
        for t in ran_on:
            t.join(10)
            assert not t.is_alive()
        assert s.run(v) == 0.0  # none of the three given-up updates landed
        assert s.run(up) == 1.0  # and the next step runs normally


def test_timed_out_multi_device_step_runs_nothing_more(g):
    release = threading.Event()
    started = threading.Event()

    def blocked(x):
        started.set()
        release.wait(30)
        return x
    v = tv.Variable(0.0, name="acc")
    with tv.device("/job:localhost/task:0/device:CPU:1"):
        gate = tv.py_func(blocked, [tv.constant(2.0)], tv.float32)
    up = v.assign_add(gate * 1.0)
    with tv.Session() as s:
        s.run(v.initializer)
        with pytest.raises(tv.errors.DeadlineExceededError):
            s.run(up, options=tv.RunOptions(timeout_in_ms=100))
        assert started.is_set()
        release.set()
        # the given-up step's last stage must not run: wait until the kernel's thread is idle
        deadline = time.monotonic() + 10
        while any(t.name.startswith("tensorvm-step") for t in threading.enumerate()):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert s.run(v) == 0.0


# ---- item 7: bad input ------------------------------------------------------------------------

def test_ragged_feed_is_invalid_argument_naming_the_placeholder(g):
    x = tv.placeholder(tv.float32, name="ragged_in")
    with tv.Session() as s:
        with pytest.raises(tv.errors.InvalidArgumentError, match="ragged_in"):
            s.run(x * 2.0, {x: [[1.0, 2.0], [3.0]]})


@pytest.mark.parametrize("fn", [tv.floordiv, tv.mod, tv.truncatediv, tv.truncatemod, tv.div])
def test_integer_division_by_zero_is_invalid_argument(g, fn):
    a = tv.placeholder(tv.int32, [3])
    b = tv.placeholder(tv.int32, [3])
    with tv.Session() as s:
        with pytest.raises(tv.errors.InvalidArgumentError, match="Integer division by zero"):
            s.run(fn(a, b), {a: [1, 2, 3], b: [1, 0, 1]})


def test_truncatediv_rounds_toward_zero(g):
    a = tv.constant([7, -7, 7, -7, 6])
    b = tv.placeholder(tv.int32, [5])
    with tv.Session() as s:
        assert s.run(tv.truncatediv(a, b), {b: [2, 2, -2, -2, 3]}).tolist() == [3, -3, -3, 3, 2]
        assert s.run(tv.truncatemod(a, b), {b: [2, 2, -2, -2, 3]}).tolist() == [1, -1, 1, -1, 0]
        x = tv.placeholder(tv.float32, [2])
        np.testing.assert_array_equal(s.run(tv.truncatediv(x, 2.0), {x: [-3.0, 3.0]}), [-1, 1])


@pytest.mark.parametrize("dtype,value", [(tv.int8, [1, 300]), (tv.uint8, [-1]),
                                         (tv.int32, [2 ** 40]), (tv.float32, [1e40])])
def test_feed_outside_the_dtype_range_is_refused(g, dtype, value):
    x = tv.placeholder(dtype, name="narrow")
    with tv.Session() as s:
        with pytest.raises(tv.errors.InvalidArgumentError, match="narrow.*range"):
            s.run(x, {x: np.asarray(value)})
        assert s.run(x, {x: np.asarray([1, 2], np.int64)}).dtype == dtype.np_dtype


def test_check_numerics(g):
    x = tv.placeholder(tv.float32, [2], name="data")
    y = tv.check_numerics(tv.log(x), "log of the data")
    assert tv.debugging.check_numerics is tv.check_numerics
    with tv.Session() as s:
        np.testing.assert_allclose(s.run(y, {x: [1.0, 1.0]}), [0, 0])
        with pytest.raises(tv.errors.InvalidArgumentError, match="log of the data.*NaN"):
            s.run(y, {x: [1.0, -1.0]})
        with pytest.raises(tv.errors.InvalidArgumentError, match="Inf"):
            s.run(y, {x: [1.0, 0.0]})
    # the gradient flowing back through a check is checked too
    z = tv.check_numerics(x, "input")
    gx = tv.gradients(tv.reduce_sum(tv.log(z)), x)[0]
    with tv.Session() as s:
        with pytest.raises(tv.errors.InvalidArgumentError, match="gradient"):
            s.run(gx, {x: [1.0, 0.0]})


def test_add_check_numerics_ops_stops_nans_before_they_reach_the_variable(g):
    x = tv.placeholder(tv.float32, [2], name="batch")
    w = tv.Variable(np.ones(2, np.float32), name="w")
    loss = tv.reduce_sum(w * x)
    check = tv.add_check_numerics_ops()
    with tv.control_dependencies([check]):  # the update waits for every check (as in TF)
        train = tv.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tv.Session() as s:
        s.run(w.initializer)
        s.run([train, check], {x: [1.0, 1.0]})
        with pytest.raises(tv.errors.InvalidArgumentError, match="NaN"):
            s.run([train, check], {x: [np.nan, 1.0]})
        assert np.isfinite(s.run(w)).all()


# ---- item 8: the plan cache is bounded ---------------------------------------------------------

def test_plan_cache_is_bounded_when_the_graph_grows(g):
    x = tv.placeholder(tv.float32, [])
    with tv.Session() as s:
        for i in range(2 * tv.Session.PLAN_CACHE_SIZE + 10):
            tv.constant(float(i))  # the graph grows between runs
            s.run(x + 1.0, {x: 1.0})
        assert s.plans_cached <= tv.Session.PLAN_CACHE_SIZE
        fetches = [x + float(i) for i in range(tv.Session.PLAN_CACHE_SIZE + 5)]
        for f in fetches:  # distinct fetches of one graph
            s.run(f, {x: 1.0})
        assert s.plans_cached == tv.Session.PLAN_CACHE_SIZE


def test_dropped_session_is_closed_on_garbage_collection(g):
    import gc
    import weakref
    s = tv.Session()
    s.run(tv.constant(1.0) + 1.0)
    ref = weakref.ref(s)
    del s
    gc.collect()
    assert ref() is None


# ---- issue 7 bug 6: an unguarded script fails at once, in one line --------------------------------

def test_unguarded_cluster_script_fails_at_once(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        import tensorvm as tv
        x = tv.constant([1.0, 2.0])
        with tv.Session("local", verbose=False) as sess:
            print(sess.run(x * 2.0))
    """))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert time.monotonic() - t0 < 30
    assert proc.returncode != 0
    assert 'if __name__ == "__main__":' in proc.stderr.strip().splitlines()[-1]
    assert "bootstrapping" not in proc.stderr


def test_guard_detection_reads_the_script(tmp_path):
    from tensorvm.runtime.cluster.local import _unguarded_main_call  # noqa: F401 - importable
    script = tmp_path / "guarded.py"
    script.write_text(textwrap.dedent("""
        import sys
        from tensorvm.runtime.cluster.local import check_main_guard

        def main():
            check_main_guard()
            print("ok")

        if __name__ == "__main__":
            main()
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


# ---- a step drops each value after its last reader (issue 14) ----------------------------------

def _program(instrs, nslots, exports):
    from tensorvm.vm.interpreter import StageProgram
    return StageProgram("/job:localhost/replica:0/task:0/device:CPU:0", "CPU", nslots,
                        ((0, -1),), tuple(instrs), tuple(exports))


def test_free_after_lists_drop_dead_values_but_never_exports():
    from tensorvm.vm.interpreter import Instr, _free_after
    # slot 0: the argument; 1 = 0 + 0; 2 = 1 + 1 (last reader of 1); 3 = 2 + 0 (last of 0, 2)
    ins = [Instr("Add", "a", (0, 0), {}, (1,), False, "here"),
           Instr("Add", "b", (1, 1), {}, (2,), False, "here"),
           Instr("Add", "c", (2, 0), {}, (3,), False, "here"),
           Instr("Add", "d", (3, 3), {}, (4,), False, "here")]  # 4: exported
    prog = _program(ins, 5, [3, 4])
    assert _free_after(prog) == ((), (1,), (0, 2), ())


def test_step_values_are_released_after_their_last_reader():
    from tensorvm.vm.interpreter import DeviceResources, Instr, execute
    ins = [Instr("Add", "a", (0, 0), {}, (1,), False, "here"),
           Instr("Add", "b", (1, 1), {}, (2,), False, "here"),
           Instr("Add", "c", (2, 0), {}, (3,), False, "here"),
           Instr("Add", "d", (3, 3), {}, (4,), False, "here")]
    x = np.arange(4.0)
    vals = execute(_program(ins, 5, [3, 4]), DeviceResources(), "t.1", [x])
    # the intermediates and the argument's slot are dropped; the exports are kept
    assert vals[0] is None and vals[1] is None and vals[2] is None
    np.testing.assert_array_equal(vals[3], 5 * x)
    np.testing.assert_array_equal(vals[4], 10 * x)


def _variable_state(sess, name):
    """White box: the stored state of the in-process session's variable ``name``."""
    from tensorvm.ops.state.state_ops import VariableState
    from tensorvm.runtime.session import local_resources
    mgr = local_resources(sess).for_device("/job:localhost/replica:0/task:0/device:CPU:0")
    (state,) = [mgr.lookup(*key) for key in mgr.names() if key[1] == name]
    assert isinstance(state, VariableState)
    return state


def test_a_scatter_update_writes_in_place_only_when_no_reader_holds_the_value():
    """A sparse update costs the rows it touches: with no reader holding the table it writes
    into it; a value someone holds (a fetched read, a step in flight) stays a snapshot."""
    g = tv.Graph()
    with g.as_default():
        t = tv.Variable(np.zeros((1000, 4), np.float32), name="table")
        idx = tv.placeholder(tv.int64, [None])
        upd = tv.placeholder(tv.float32, [None, 4])
        train = tv.group(tv.scatter_add(t, idx, upd))
    feed = {idx: np.array([3, 7, 3]), upd: np.ones((3, 4), np.float32)}
    with tv.Session(graph=g) as s:
        s.run(t.initializer)
        s.run(train, feed)
        state = _variable_state(s, "table")
        held = state.value  # a reader holds the value: the next update copies
        s.run(train, feed)
        assert held[3, 0] == 2.0 and state.value[3, 0] == 4.0 and state.value is not held
        del held
        buffer = state.value.ctypes.data
        s.run(train, feed)  # nothing holds it: in place
        assert state.value.ctypes.data == buffer
        want = np.zeros((1000, 4), np.float32)
        np.add.at(want, np.tile([3, 7, 3], 3), 1.0)
        np.testing.assert_array_equal(s.run(t), want)
        assert not state.value.flags.writeable  # stored read-only again


def test_gradient_descent_updates_in_place_with_the_copys_bits():
    """ApplyGradientDescent writes into the variable's buffer when nothing else holds it
    (block by block, the same float operations: the same bits as the copy it replaced), and
    copies when a reader holds the value."""
    from tensorvm.ops.state.training_ops import _CHUNK, apply_gradient_descent
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(_CHUNK // 100 + 7, 300)).astype(np.float32)  # > 1 block, ragged end
    d = rng.normal(size=w0.shape).astype(np.float32)
    g = tv.Graph()
    with g.as_default():
        w = tv.Variable(w0, name="w")
        step = tv.group(apply_gradient_descent(w, np.float32(0.1), tv.constant(d)))
    with tv.Session(graph=g) as s:
        s.run(w.initializer)
        state = _variable_state(s, "w")
        held = state.value
        s.run(step)  # held: a copy
        assert state.value is not held
        np.testing.assert_array_equal(held, w0)
        del held
        buffer = state.value.ctypes.data
        s.run(step)  # alone: in place
        assert state.value.ctypes.data == buffer and not state.value.flags.writeable
        want = w0
        for _ in range(2):
            want = want - np.float32(0.1) * d
        np.testing.assert_array_equal(s.run(w), want)
