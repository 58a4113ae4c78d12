"""A shuffle three times larger than each worker's ``memory_limit`` completes through storage
with the exact result (TeraSort on a LocalCluster of two workers with small memory)."""
import numpy as np
import pytest

import tensorvm as tv
from tensorvm.jobs.sort import RECORD, teragen, terasort_job

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MEMORY_LIMIT = 320 << 20


@pytest.fixture(scope="module")
def small_workers():
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      memory_limit=MEMORY_LIMIT, dashboard_address=None) as lc:
        with tv.Session(lc.scheduler_address, graph=tv.Graph(), verbose=False) as s:
            yield s, lc


def _prefix_sum(recs):
    return int(np.ascontiguousarray(recs[:, :8]).view(">u8").astype(np.uint64).sum(
        dtype=np.uint64))


@pytest.mark.timeout(240)
def test_shuffle_three_times_memory_limit(small_workers, tmp_path):
    session, lc = small_workers
    n = 3 * MEMORY_LIMIT // RECORD  # 3 x one worker's memory limit of records
    src, out = (tmp_path / "in").as_uri(), (tmp_path / "out").as_uri()
    teragen(src, n, files=8, seed=11)
    job = terasort_job(src, out, num_reducers=32, sample=4000, split_size=16 << 20)
    assert job._through_storage(session, job._splits())  # shuffle="auto" picks storage
    res = job.run(session)
    assert res.counters["map_input_records"] == n
    assert res.counters["reduce_output_records"] == n
    assert len(lc.scheduler_info["workers"]) == 2  # no worker was killed for memory
    total, last, psum = 0, None, 0
    for r in range(32):  # globally sorted, and the same records (count and key sum)
        recs = np.fromfile(tmp_path / "out" / f"part-r-{r:05d}", np.uint8).reshape(-1, RECORD)
        keys = np.ascontiguousarray(recs[:, :10]).view("S10").ravel()
        assert not np.any(keys[1:] < keys[:-1])
        assert last is None or not len(keys) or keys[0] >= last
        last = keys[-1] if len(keys) else last
        total += len(recs)
        psum = (psum + _prefix_sum(recs)) % (1 << 64)
    src_sum = sum(_prefix_sum(np.fromfile(p, np.uint8).reshape(-1, RECORD))
                  for p in (tmp_path / "in").iterdir()) % (1 << 64)
    assert total == n and psum == src_sum


def test_a_job_with_a_combiner_keeps_its_shuffle_in_memory(small_workers):
    """Before: a 3 GiB word count went through storage like a sort of 3 GiB, its map tasks
    then pinned steps (a worker that joined got none), for a shuffle its combiner made ~1,000x
    smaller than the input. Without a combiner the input's size still sends it there."""
    import tensorvm.mapreduce as mr
    from tensorvm.storage.splits import Split
    session, _ = small_workers
    big = [(0, Split(f"file:///nowhere/in-{i}", "text", 0, 256 << 20)) for i in range(4)]

    def words(lines):
        return mr.emit(tv.strings.split(lines), 1)
    with_combiner = mr.Job(mr.text("file:///nowhere/in-*"), words, combine="sum", reduce="sum")
    without = mr.Job(mr.text("file:///nowhere/in-*"), words, reduce="sum")
    assert without._through_storage(session, big)  # 1 GiB over 2 x 320 MB workers
    assert not with_combiner._through_storage(session, big)
