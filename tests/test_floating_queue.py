"""How floating tasks look to Dask's scheduler (issue 23): a map or reduce task is queued on
the scheduler (root-ish) and handed to a worker with a free thread, so a stopped or slow
worker holds only its queue slots; a Send's pick, and a stage fed by one task, stay where
their input is. Dask groups a tuple key by its whole name (one task a group), so its own
root-ish rule (a group larger than twice the threads) never applies to tensorvm's keys."""
from distributed.utils import key_split_group

from tensorvm.runtime.dask_plane import _queued
from tensorvm.vm.interpreter import pick, run_stage

M = "tvm_g1_worker_float_cpu0_s0-map{}"
R = "tvm_g1_worker_float_cpu0_s1-reduce{}"
SEND = "tvm_g1_worker_float_cpu0_s0_send-map{}"


def _map_reduce_graph(maps=3, reducers=2):
    """A step graph as ``step_graph`` builds one for a floating map-reduce plan."""
    dsk = {(M.format(m), "t.0"): (run_stage, "program", None, "t.0", 1) for m in range(maps)}
    for m in range(maps):
        for r in range(reducers):
            dsk[(SEND.format(m), "t.0", r)] = (pick, (M.format(m), "t.0"), r)
    for r in range(reducers):
        dsk[(R.format(r), "t.0")] = (run_stage, "program", None, "t.0", 1,
                                     *[(SEND.format(m), "t.0", r) for m in range(maps)])
    return dsk


def test_each_floating_task_is_its_own_dask_group():
    dsk = _map_reduce_graph()
    assert len({key_split_group(k) for k in dsk if k[0].startswith(M[:-3])}) == 3


def test_maps_and_reducers_are_queued_picks_are_not():
    dsk = _map_reduce_graph()
    for key in dsk:
        task = _queued(key, dsk)
        if "_send-" in key[0]:
            assert task is dsk[key], "a pick runs where its map's output is"
        else:
            assert getattr(task, "data_producer", False), f"{key} is not queued"
    reduce0 = _queued((R.format(0), "t.0"), dsk)
    assert reduce0.dependencies == {(SEND.format(m), "t.0", 0) for m in range(3)}


def test_a_stage_fed_by_one_task_stays_with_its_input():
    dsk = _map_reduce_graph(maps=1)
    assert _queued((R.format(0), "t.0"), dsk) is dsk[(R.format(0), "t.0")]
