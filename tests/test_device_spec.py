"""Device strings: parsing, validation, merging with enclosing ``tv.device`` scopes, device
functions (``tv.train.replica_device_setter``). No cluster: these are pure graph-building tests."""
import inspect
import os

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.framework.device_spec import DeviceSpec, canonical

THIS_FILE = os.path.basename(__file__)



@pytest.mark.parametrize("text, fields", [
    ("/job:ps/replica:0/task:1/device:CPU:2", ("ps", 0, 1, "CPU", 2)),
    ("/job:worker/task:3", ("worker", None, 3, None, None)),
    ("/job:ps/task:0/cpu:0", ("ps", None, 0, "CPU", 0)),
    ("/cpu:0", (None, None, None, "CPU", 0)),
    ("/gpu:1", (None, None, None, "GPU", 1)),
    ("/GPU:0", (None, None, None, "GPU", 0)),
    ("/device:gpu:*", (None, None, None, "GPU", None)),
    ("/device:CPU", (None, None, None, "CPU", None)),
    ("cpu:0", (None, None, None, "CPU", 0)),
    ("/replica:2", (None, 2, None, None, None)),
    ("", (None, None, None, None, None)),
    (None, (None, None, None, None, None)),
])
def test_parse_full_and_partial(text, fields):
    s = DeviceSpec.parse(text)
    assert (s.job, s.replica, s.task, s.device_type, s.device_index) == fields


@pytest.mark.parametrize("text, canon", [
    ("/job:ps/task:1/cpu:0", "/job:ps/task:1/device:CPU:0"),
    ("/gpu:0", "/device:GPU:0"),
    ("/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0"),
    ("/device:GPU:*", "/device:GPU:*"),
])
def test_canonical_form_round_trips(text, canon):
    assert canonical(text) == canon
    assert canonical(canon) == canon


@pytest.mark.parametrize("bad", [
    "/job:ps/task:x", "/job:/task:0", "/jobs:ps", "/job:ps/task:-1", "/device:TPU:0",
    "/job:ps/task:0/extra", "/job:1ps", "garbage", "/cpu:x", "/job:ps/replica:one",
    "/device:CPU:a", "/task:1.5",
])
def test_malformed_strings_are_invalid_argument(bad):
    for _ in range(2):  # parsing is memoised; a failure must not be
        with pytest.raises(tv.errors.InvalidArgumentError, match="malformed device string"):
            DeviceSpec.parse(bad)


def test_non_string_device_is_invalid_argument():
    with pytest.raises(tv.errors.InvalidArgumentError, match="must be a string"):
        DeviceSpec.parse(5)


def test_specs_are_values():
    a, b = DeviceSpec.parse("/job:ps/task:0"), DeviceSpec.parse("/job:ps/task:0")
    assert a == b and hash(a) == hash(b)
    assert a.to_string() == str(a) == "/job:ps/task:0"
    assert DeviceSpec(job="ps", task=0) == a


def test_merge_inner_fields_win_and_conflicts_detected():
    outer = DeviceSpec.parse("/job:ps/task:1/device:CPU:0")
    inner = DeviceSpec.parse("/job:worker")
    assert inner.merged_over(outer).to_string() == "/job:worker/task:1/device:CPU:0"
    assert DeviceSpec.parse("/gpu:0").merged_over(outer).to_string() == \
        "/job:ps/task:1/device:GPU:0"
    assert inner.conflicts_with(outer)
    assert not DeviceSpec.parse("/task:1").conflicts_with(outer)
    assert DeviceSpec.parse("/job:ps").with_defaults().to_string() == \
        "/job:ps/replica:0/task:0/device:CPU:0"


def test_nested_scopes_merge_partial_specs(g):
    with tv.device("/job:ps/task:1"):
        a = tv.constant(1.0, name="a")
        with tv.device("/cpu:0"):
            b = tv.constant(1.0, name="b")
            with tv.device("/job:worker"):
                c = tv.constant(1.0, name="c")
            with tv.device(None):
                d = tv.constant(1.0, name="d")
                with tv.device("/task:2"):
                    e = tv.constant(1.0, name="e")
            with tv.device(""):  # an empty string adds nothing
                f = tv.constant(1.0, name="f")
    top = tv.constant(1.0, name="top")
    assert a.op.device == "/job:ps/task:1"
    assert b.op.device == "/job:ps/task:1/device:CPU:0"
    assert c.op.device == "/job:worker/task:1/device:CPU:0"
    assert d.op.device == ""  # tv.device(None) clears every enclosing scope
    assert e.op.device == "/task:2"
    assert f.op.device == "/job:ps/task:1/device:CPU:0"
    assert top.op.device == ""
    assert a.device == a.op.device


def test_malformed_device_raises_at_the_with_line(g):
    n_ops = len(g.get_operations())
    with pytest.raises(tv.errors.InvalidArgumentError) as info:
        line = inspect.currentframe().f_lineno + 1
        with tv.device("/job:ps/task:zero"):
            tv.constant(1.0)  # never built
    assert len(g.get_operations()) == n_ops
    frames = [e for e in info.traceback if os.path.basename(str(e.path)) == THIS_FILE]
    assert frames[-1].lineno + 1 == line  # pytest's lineno is 0-based
    assert "task:zero" in str(info.value)


def test_device_function_sees_the_op(g):
    seen = []

    def fn(op):
        seen.append((op.type, op.name))
        return "/job:ps/task:0" if op.type == "VariableV2" else "/job:worker/task:1"

    with tv.device(fn):
        v = tv.Variable(np.zeros(3, np.float32), name="v")
        y = tv.add(v, 1.0, name="y")
    assert v.op.device == "/job:ps/task:0"
    assert y.op.device == "/job:worker/task:1"
    assert ("VariableV2", "v") in seen and ("Add", "y") in seen


def test_device_function_result_merges_with_scopes(g):
    with tv.device("/job:worker/task:3"):
        with tv.device(lambda op: "/job:worker/task:0"):
            a = tv.constant(1.0, name="a")
            with tv.device("/cpu:0"):
                b = tv.constant(1.0, name="b")
        with tv.device(lambda op: None):  # a function may decline to choose
            c = tv.constant(1.0, name="c")
    assert a.op.device == "/job:worker/task:0"
    assert b.op.device == "/job:worker/task:0/device:CPU:0"
    assert c.op.device == "/job:worker/task:3"


def test_device_function_returning_garbage_fails_at_the_op(g):
    with tv.device(lambda op: "/job:ps/task:?"), \
            pytest.raises(tv.errors.InvalidArgumentError, match="malformed"):
        tv.constant(1.0)


def test_replica_device_setter_balances_variables_by_size(g):
    setter = tv.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")
    with tv.device(setter):
        big = tv.Variable(np.zeros(10, np.float32), name="big")  # ps0: 40 bytes
        small = tv.Variable(np.zeros(5, np.float32), name="small")  # ps1: 20 bytes
        tiny = tv.Variable(np.zeros(1, np.float32), name="tiny")  # ps1: 24 bytes
        y = big + 1.0
    assert big.device == "/job:ps/task:0"
    assert small.device == "/job:ps/task:1"
    assert tiny.device == "/job:ps/task:1"
    assert y.op.device == "/job:worker/task:0"


def test_replica_device_setter_from_cluster_and_no_ps(g):
    spec = tv.train.ClusterSpec({"ps": 3, "worker": 2})
    setter = tv.train.replica_device_setter(cluster=spec, worker_device="/job:worker/task:1")
    with tv.device(setter):
        vs = [tv.Variable(np.zeros(4, np.float32)) for _ in range(3)]
        y = vs[0] * 2.0
    assert sorted(v.device for v in vs) == [f"/job:ps/task:{i}" for i in range(3)]
    assert y.op.device == "/job:worker/task:1"
    only_worker = tv.train.replica_device_setter(ps_tasks=0, worker_device="/job:worker")
    with tv.device(only_worker):
        w = tv.Variable(1.0)
    assert w.device == "/job:worker"


def test_replica_device_setter_places_end_to_end(g):
    setter = tv.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")
    with tv.device(setter):
        a = tv.Variable(np.ones(8, np.float32), name="a")
        b = tv.Variable(np.ones(8, np.float32), name="b")
        total = tv.reduce_sum(a + b)
        upd = a.assign_add(tv.ones_like(a))
    with tv.Session() as s:
        plan = s.plan(total)
        s.run(tv.global_variables_initializer())
        s.run(upd)
        assert s.run(total) == 24.0
    assert {t.device for t in plan.tasks} == {
        "/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0",
        "/job:worker/replica:0/task:0/device:CPU:0"}
