"""The plan format (tensorvm.vm.program) and what a stage returns (tensorvm.vm.results):
frozen plain data read through fields, caches kept beside it, the alignment guard only in the
result's wire form."""
import dataclasses
import pickle

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.vm import interpreter
from tensorvm.vm.program import Feed, Instr, Plan, Recv, Result, StageProgram, Task
from tensorvm.vm.results import DEAD, StageResult

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def _program():
    return StageProgram(CPU0, "CPU", 3, ((0, -1), (1, 0)),
                        (Instr("Add", "add", (0, 1), {}, (2,), False, "here.py:1"),), (2,),
                        "t", ("add",))


def test_plan_objects_are_frozen_and_hold_no_cache():
    p = _program()
    interpreter.execute(p, interpreter.DeviceResources(), "s.1",
                        [np.ones(2), StageResult((np.ones(2),))])
    assert not hasattr(p, "__dict__")  # slots: nothing can be hung on it
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.nslots = 4
    t = Task("t", CPU0, 0, p, (Feed(0), Recv("snd")), False)
    plan = Plan((t,), (), (Result("t", 0), Feed(1)), (("x", 0), ("y", 0)), ("t",), (CPU0,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.tasks = ()
    assert isinstance(plan.uid, str) and len(plan.uid) == 12


def test_a_program_runs_the_same_after_a_trip_through_pickle():
    p = _program()
    rt = interpreter.DeviceResources()
    args = [np.arange(3.0), StageResult((np.ones(3),))]
    want = interpreter.run_stage(p, rt, "s.2", 1, *args)
    got = interpreter.run_stage(pickle.loads(pickle.dumps(p)), rt, "s.3", 1, *args)
    assert type(got) is StageResult and len(got) == 1  # exports only: no guard in front
    np.testing.assert_array_equal(got[0], want[0])


def test_a_dead_argument_makes_the_op_dead_in_the_one_execute():
    vals = interpreter.execute(_program(), interpreter.DeviceResources(), "s.4",
                               [DEAD, StageResult((np.ones(2),))])
    assert vals[2] is DEAD


def test_stage_results_carry_the_guard_only_on_the_wire():
    from distributed.protocol import deserialize, serialize
    big = np.arange(1 << 16, dtype=np.float64)
    r = StageResult((big, 3))
    header, frames = serialize(r, serializers=("dask", "pickle"))
    # the tiny guard is the first out-of-band buffer, so the tensor gets a buffer of its own
    assert memoryview(frames[1]).nbytes == 8 and memoryview(frames[2]).nbytes == big.nbytes
    back = deserialize(header, frames)
    assert type(back) is StageResult and back[1] == 3
    np.testing.assert_array_equal(back[0], big)
    assert interpreter.pick(r, 0)[0] is big  # a Send's 1-tuple, in one process as it is


def test_a_compiled_plan_reads_through_typed_refs():
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float64, [2], name="x")
        with tv.device("/job:ps/task:0"):
            a = x * 2.0
        with tv.device("/job:worker/task:0"):
            b = a + x
    with tv.Session(graph=g) as s:
        plan = s.plan([b, x], feed_dict={x: np.ones(2)})
        np.testing.assert_array_equal(s.run(b, {x: np.ones(2)}), [3.0, 3.0])
    assert isinstance(plan.fetches[0], Result) and isinstance(plan.fetches[1], Feed)
    refs = {type(a) for t in plan.tasks for a in t.args}
    assert refs <= {Feed, Result, Recv} and Feed in refs
