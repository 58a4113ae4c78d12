"""``cycling_batch``: where its data lives by default, and the batches it reads (issue 26).

A ``run_replicas`` model written as the README shows (``cycling_batch([X, y], B)`` inside
``model_fn``, under ``replica_device_setter``) must keep its data on the replica's worker:
placed with no device, every step fetched its batch from the PS (1.6x slower)."""
import numpy as np
import pytest

import tensorvm as tv
from tensorvm.train.replicas import cycling_batch

CLUSTER = {"ps": 1, "worker": 2}


def _data_devices(g) -> dict:
    """Device of each op cycling_batch made for its state: the arrays and the position."""
    return {op.name: op.device for op in g.get_operations()
            if op.type == "VariableV2" and op.name.startswith("batch/")}


def test_default_device_is_the_replicas_worker_under_replica_device_setter():
    g = tv.Graph()
    X = np.arange(24, dtype=np.float32).reshape(6, 4)
    with g.as_default(), tv.device(tv.train.replica_device_setter(
            cluster=CLUSTER, worker_device="/job:worker/task:1")):
        cycling_batch([X, X[:, 0]], 2)
        w = tv.Variable(np.zeros(4, np.float32), name="w")
    devices = _data_devices(g)
    assert sorted(devices) == ["batch/data", "batch/data_1", "batch/position"]
    assert set(devices.values()) == {"/job:worker/task:1"}
    assert w.op.device == "/job:ps/task:0"  # the model's variables still go to the PS


def test_explicit_device_wins_and_no_scope_means_no_device():
    g = tv.Graph()
    X = np.zeros((4, 2), np.float32)
    with g.as_default(), tv.device(tv.train.replica_device_setter(
            cluster=CLUSTER, worker_device="/job:worker/task:1")):
        cycling_batch([X], 2, device="/job:worker/task:0")
    assert set(_data_devices(g).values()) == {"/job:worker/task:0"}
    # the rows' offsets live with the data: no tensor crosses devices to index it (the
    # variables' own ops are colocated with them)
    assert {op.device for op in g.get_operations() if op.colocation is None} == \
        {"/job:worker/task:0"}
    g2 = tv.Graph()
    with g2.as_default():
        cycling_batch([X], 2)
    assert set(_data_devices(g2).values()) == {""}


@pytest.mark.parametrize("batch", [3, 4])
def test_batches_cycle_through_the_rows(batch):
    X = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10, dtype=np.float32)
    g = tv.Graph()
    with g.as_default():
        xb, yb = cycling_batch([X, y], batch)
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            for t in range(7):
                rows = (t * batch + np.arange(batch)) % 10
                got_x, got_y = s.run([xb, yb])
                np.testing.assert_array_equal(got_x, X[rows])
                np.testing.assert_array_equal(got_y, y[rows])
