"""The per-step paths of parameter-server training on the direct data plane (issue 26): what
a step does on the PS and how many thread switches it costs, each checked where it is decided.

* An optimizer's dense apply (``ApplyGradientDescent``, ...) is a quick stage: it runs on the
  PS's event loop, not in a thread each step.
* A partition that exchanges nothing with other devices and holds a stage that runs in a
  thread (a sync chief's take-apply-release) runs its K steps in one thread call.
* Sync replicas: one accumulator per PS task (one ``SyncAccApply`` per worker step, one
  ``SyncAccTake`` per chief step); a waiting op wakes the others only when its change can let
  one go on.
* A worker freezes its long-lived heap at its first plan (no ~50 ms full collection
  mid-training).
The results of these paths are checked against closed forms in ``test_ps_speed_paths.py``
(sync, K steps per run) and ``test_ps_cluster.py``.
"""
import threading

import numpy as np
import pytest

import tensorvm as tv
from tensorvm.runtime.direct.registered_plans import PlanStore, partitions
from tensorvm.train import sync_replicas as sr
from tensorvm.train import sync_state

TV_CLUSTER = {"ps": 1, "worker": 2}
TV_CLUSTER_SHARED = True
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _replica_graph(sync: bool, ps_tasks: int = 1):
    """A worker-0 replica of a two-variable model, as run_replicas builds it."""
    g = tv.Graph()
    spec = {"ps": ps_tasks, "worker": 2}
    with g.as_default(), tv.device(tv.train.replica_device_setter(
            cluster=spec, worker_device="/job:worker/task:0")):
        gs = tv.train.get_or_create_global_step()
        x = tv.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
        w = tv.Variable(np.ones(2, np.float32), name="w")
        b = tv.Variable(np.float32(0.5), name="b")
        loss = tv.reduce_mean(tv.square(tv.reduce_sum(x * w, axis=1) + b))
        opt = tv.train.GradientDescentOptimizer(0.1)
        if sync:
            opt = tv.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2,
                                                 total_num_replicas=2)
        train = opt.minimize(loss, global_step=gs)
    return g, gs, train, opt


def _parts(session, fetches):
    plan = session.plan(fetches)
    return partitions(plan, "p", {d: f"tcp://127.0.0.1:{i}" for i, d in
                                  enumerate(plan.devices)})


def _ps(parts):
    return next(p for d, p in parts.items() if "/job:ps/" in d)


# ---- decided when the plan is partitioned ----------------------------------------------------

def test_a_dense_apply_runs_on_the_ps_event_loop(cluster):
    g, gs, train, _ = _replica_graph(sync=False)
    ps = _ps(_parts(cluster.session(graph=g), [train, gs]))
    applies = [t.name for t in ps.tasks
               if any(i.type == "ApplyGradientDescent" for i in t.program.instrs)]
    assert applies and set(applies) <= ps.inline  # was: a thread hop every step


def test_a_sync_chiefs_k_steps_run_in_one_thread_call(cluster):
    from tensorvm.runtime.direct.data_plane import DataPlane
    g, gs, train, opt = _replica_graph(sync=True)
    s = cluster.session(graph=g)
    plane = DataPlane(None, PlanStore(), None)
    try:
        chief = _ps(_parts(s, opt.chief_train_op))
        assert chief.waiting and not chief.pushes  # the take waits; nothing crosses devices
        assert plane._table(chief) is None  # K steps in one executor call
        worker_step = _ps(_parts(s, [train, gs]))  # receives the gradients: per step
        table = plane._table(worker_step)
        assert table is not None and len(table) == len(worker_step.tasks)
        assert plane._table(worker_step) is table  # made once per partition
    finally:
        plane.pool.shutdown(wait=False)
        plane.wait_pool.shutdown(wait=False)


@pytest.mark.parametrize("ps_tasks", [1, 2])
def test_sync_one_accumulator_per_ps_task(ps_tasks):
    g, _, _, opt = _replica_graph(sync=True, ps_tasks=ps_tasks)
    applies = [op for op in g.get_operations() if op.type == "SyncAccApply"]
    takes = [op for op in g.get_operations() if op.type == "SyncAccTake"]
    variables = {op.name: op.device for op in g.get_operations() if op.type == "VariableV2"
                 and op.name in ("w", "b")}
    # one per PS task holding variables (was: one per variable, 2 and 2)
    assert len(applies) == len(takes) == len(set(variables.values())) == min(ps_tasks, 2)
    assert len({op.attrs["acc"] for op in applies}) == len(applies)


# ---- wakes -----------------------------------------------------------------------------------

class _CountingCondition(threading.Condition):
    def __init__(self):
        super().__init__()
        self.notified = 0

    def notify_all(self):
        self.notified += 1
        super().notify_all()


class _Resources:
    def __init__(self):
        self.held = {}

    def lookup_or_create(self, container, name, make):
        if name not in self.held:
            self.held[name] = make()
        return self.held[name]


class _Ctx:
    def __init__(self):
        self.resources = _Resources()

    def cancelled(self):
        return False


def test_an_accepted_gradient_wakes_the_take_only_when_it_completes_the_set():
    ctx = _Ctx()
    acc = sr._acc(ctx, "acc", ("dense",), 2)
    acc.cond = _CountingCondition()
    acc.machine.set_step(0)
    codes = [int(sr._apply_kernel(ctx, np.int64(0), np.ones(2, np.float32), acc="acc",
                                  kinds=("dense",), num_required=2, replica=r))
             for r in ("a", "b", "c")]
    assert codes == [sr._CODES[sync_state.ACCEPTED]] * 2 + [sr._CODES[sync_state.SURPLUS]]
    assert acc.cond.notified == 1  # the second one (was: one per apply, 3)
    out = sr._take_kernel(ctx, np.int64(0), acc="acc", kinds=("dense",), num_required=2,
                          specs=(("float32", (2,)),))
    np.testing.assert_array_equal(out, np.ones(2, np.float32))
    assert acc.cond.notified == 2  # a take moves the step on: waiters look again


def test_a_token_taken_wakes_nobody_a_release_wakes_the_waiters():
    ctx = _Ctx()
    gate = sr._gate(ctx, "gate")
    gate.cond = _CountingCondition()
    sr._token_release_kernel(ctx, np.int64(1), gate="gate", tokens=2)
    assert gate.cond.notified == 1
    got = [int(sr._token_wait_kernel(ctx, np.int64(0), gate="gate")) for _ in range(2)]
    assert got == [1, 1] and gate.cond.notified == 1  # was: 3


# ---- the worker's heap -----------------------------------------------------------------------

def test_a_worker_freezes_its_heap_at_its_first_plan(cluster):
    import gc
    g = tv.Graph()
    with g.as_default(), tv.device("/job:worker/task:1"):
        v = tv.Variable(np.float32(1.0), name="v")
        inc = v.assign_add(np.float32(1.0))
    s = cluster.session(graph=g)
    s.run(v.initializer)
    opts = tv.RunOptions(data_plane="direct")
    assert [float(s.run(inc, options=opts)) for _ in range(2)] == [2.0, 3.0]
    frozen = cluster.client.run(gc.get_freeze_count)
    assert frozen[cluster.worker("worker-1")] > 1000
