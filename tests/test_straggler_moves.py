"""Floating tasks moved off a straggler at a step's tail (issue 23: one worker slowed).

Dask never steals a task that has started, so the last map tasks that start on a slow worker
set the job's pace while the other workers sit idle. :mod:`tensorvm.runtime.cluster.stragglers`
moves such a task to an idle worker (its first attempt's result is dropped). The decision is a
pure function, tested here case by case; then on a cluster started by hand, a map task that
never ends on its worker (a hung call) no longer holds the job: failure first, the old
scheduler waits for it.
"""
from __future__ import annotations

import pytest
from hand_cluster import hand_cluster, restore  # noqa: F401  (hand_cluster: a fixture)
from test_floating_tasks import _corpus, _in_thread, _job, _per_worker, _session, _wait

from tensorvm.runtime.cluster.stragglers import (MIN_REMAINING_S, TOPIC_MOVES, Running,
                                                 choose_moves, task_kind)

D = {("k", "slow"): [1.8, 1.5, 2.0], ("k", "fast"): [0.45, 0.5, 0.4]}


# ---- the decision (pure) ---------------------------------------------------------------------
def test_a_task_far_from_done_on_a_slow_worker_moves_to_the_idle_one():
    assert choose_moves([Running("m", "k", "slow", 0.3)], ["fast"], D) == [("m", "slow", "fast")]


def test_a_task_nearly_done_stays():
    # 1.8 s usual there, 1.6 s in: 0.2 s left < 1.5 x 0.45 s elsewhere
    assert choose_moves([Running("m", "k", "slow", 1.6)], ["fast"], D) == []


def test_no_move_to_a_slower_worker():
    assert choose_moves([Running("m", "k", "fast", 0.0)], ["slow"], D) == []


def test_a_task_that_overran_its_workers_usual_time_moves():
    # on the fast worker (0.45 s usual) a task 5 s in is hung, whatever that worker's speed
    assert choose_moves([Running("m", "k", "fast", 5.0)], ["slow"], D) == [("m", "fast", "slow")]


def test_a_task_on_a_worker_with_no_finished_task_of_its_kind():
    # a worker that joined: the kind's usual 0.4 s there too
    d = {("k", "fast"): [0.4]}
    assert choose_moves([Running("m", "k", "new", 0.1)], ["fast"], d) == []  # 0.3 s left
    assert choose_moves([Running("m", "k", "new", 1.1)], ["fast"], d) == [("m", "new", "fast")]
    assert choose_moves([Running("m", "k", "new", None)], ["fast"], d) == []  # nothing ahead
    running = [Running("m1", "k", "new", 0.05), Running("m2", "k", "new", None)]
    assert choose_moves(running, ["fast"], d) == [("m2", "new", "fast")]  # 0.35 + 0.4 s


def test_one_slow_task_does_not_make_a_worker_slow():
    # a restarted worker's first task (imports, cold caches) took 2 s: one sample is not its
    # speed, the kind's median (0.5 s) is; with a second slow one it is
    d = {("k", "a"): [0.5, 0.5], ("k", "b"): [2.0]}
    assert choose_moves([Running("m", "k", "b", 0.2)], ["a"], d) == []
    d["k", "b"].append(2.0)
    assert choose_moves([Running("m", "k", "b", 0.2)], ["a"], d) == [("m", "b", "a")]


def test_a_task_waiting_behind_a_slow_one_counts_the_wait():
    # m2 has not started on the slow worker: m1's 1.7 s left, then its own 1.8 s; fast2 has
    # no figures of its own: the kind's median, 1.0 s
    running = [Running("m1", "k", "slow", 0.1), Running("m2", "k", "slow", None)]
    assert choose_moves(running, ["fast"], D) == [("m2", "slow", "fast")]
    assert choose_moves(running, ["fast", "fast2"], D) == [("m2", "slow", "fast"),
                                                           ("m1", "slow", "fast2")]


def test_one_task_per_idle_worker_and_never_twice():
    running = [Running("a", "k", "slow", 0.1), Running("b", "k", "slow", 0.2)]
    assert choose_moves(running, ["fast"], D) == [("a", "slow", "fast")]  # the longest left
    assert choose_moves(running, ["fast"], D, moved={"a"}) == [("b", "slow", "fast")]
    assert choose_moves(running, ["fast"], D, moved={"a", "b"}) == []


def test_a_task_that_cannot_move_still_keeps_its_worker_busy():
    # m1 was moved away already (or is a started reducer): it stays, but m2 waits behind it
    running = [Running("m1", "k", "slow", 0.1, movable=False), Running("m2", "k", "slow", None)]
    assert choose_moves(running, ["fast"], D) == [("m2", "slow", "fast")]
    assert choose_moves(running[:1], ["fast"], D) == []


def test_picks_behind_a_busy_thread_all_move_at_once():
    # picks take no time: every one waiting behind the slow worker's map goes to the idle
    # worker in one look (one a look, 0.1 s apart, held the reducers back 0.5 s)
    d = dict(D)
    d["p", "fast"] = [0.001, 0.001]
    d["p", "slow"] = [0.001, 0.001]
    running = [Running("m", "k", "slow", 0.1)] + \
        [Running(f"pick{i}", "p", "slow", None) for i in range(6)]
    moves = choose_moves(running, ["fast"], d)
    assert sorted(k for k, _, _ in moves) == ["m"] + [f"pick{i}" for i in range(6)]
    assert {(a, b) for _, a, b in moves} == {("slow", "fast")}


def test_no_figures_for_a_kind_no_move():
    assert choose_moves([Running("m", "other", "slow", 9.0)], ["fast"], D) == []


def test_never_a_move_for_less_than_the_floor():
    d = {("k", "a"): [0.01], ("k", "b"): [0.01]}
    left = MIN_REMAINING_S / 2  # 5x the idle worker's time, but not worth a move
    assert choose_moves([Running("m", "k", "a", 0.01 + left)], ["b"], d) == []


def test_the_factor_is_the_margin():
    r = [Running("m", "k", "slow", 0.9)]  # ~0.9 s left against 0.45 s: 2x
    assert choose_moves(r, ["fast"], D, factor=1.5) == [("m", "slow", "fast")]
    assert choose_moves(r, ["fast"], D, factor=2.5) == []


def test_only_floating_stage_tasks_have_a_kind():
    assert task_kind(("tvm_g1_worker_float_cpu0_s0-map7", "ab12.0")) == \
        ("tvm_g1_worker_float_cpu0_s0-map", "ab12.0")
    assert task_kind(("tvm_g1_worker_0_cpu0_s0", "ab12.0")) is None  # pinned: never moved
    assert task_kind(("tvm_g1_worker_float_cpu0_s0_send-map7_1", "ab12.0", 1)) == \
        ("tvm_g1_worker_float_cpu0_s0_send", "ab12.0")  # a pick: every pick of the step
    assert task_kind("tvm_g1_worker_float_cpu0_s0-map7") is None  # not a tensorvm step key


def test_a_task_ending_right_after_a_look_is_looked_at_soon():
    """Before: a floating task that ended within RECHECK_S of the last look scheduled no look
    at all, so the worker it left idle waited for the 0.1 s tick (the slowed word count's last
    map ended 10 ms after a look: its idle worker took the straggler's queued map 80 ms late)."""
    import asyncio
    import time

    from tensorvm.runtime.cluster import stragglers

    looks = []
    plugin = stragglers.StragglerMoves()
    plugin._look = lambda: looks.append(time.monotonic())

    async def a_map_ends_just_after_a_look():
        plugin._last = time.monotonic()  # a look just now
        plugin.transition(("tvm_g1_worker_float_cpu0_s0-map7", "ab12.0"), "processing",
                          "memory", worker="tcp://w0", startstops=[])
        await asyncio.sleep(stragglers.RECHECK_S * 2)  # well before the tick (CHECK_S)
    asyncio.run(a_map_ends_just_after_a_look())
    assert len(looks) == 1
    assert looks[0] - plugin._last >= stragglers.RECHECK_S / 2  # deferred, not immediate


# ---- on a cluster started by hand --------------------------------------------------------------
def _hung_after_first(who: str):
    """A hold for the recording map: worker ``who``'s map calls after its first hang until
    the file ``release`` exists (or a minute passes), then write ``returned-<who>``."""
    def hold(name, folder):
        import time
        if name != who or (folder / "release").exists():
            return
        log = folder / "maps.log"
        done = sum(1 for line in (log.read_text().splitlines() if log.exists() else [])
                   if line.split("\t")[0] == who)
        if done < 1:
            return
        (folder / f"hung-{who}").touch()
        deadline = time.monotonic() + 60
        while not (folder / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        (folder / f"returned-{who}").touch()
    return hold


@pytest.fixture
def cluster(hand_cluster):  # noqa: F811
    yield hand_cluster
    restore(hand_cluster)


@pytest.mark.cluster
@pytest.mark.timeout(150)
def test_a_hung_map_task_is_moved_and_the_job_ends_without_it(cluster, tmp_path):
    src, expected = _corpus(tmp_path / "in", n_files=4, splits_per_file=4)
    job = _job(src, tmp_path, _hung_after_first("worker-1"))
    events: list = []
    cluster.client.subscribe_topic(TOPIC_MOVES, lambda ev: events.append(ev[1]))
    try:
        with _session(cluster) as s:
            fut = _in_thread(lambda: job.run(s))
            res = fut.result(timeout=120)
            returned = (tmp_path / "returned-worker-1").exists()
            # counted before the release: the hung call, once let go, records its map too
            done = _per_worker(tmp_path)
    finally:
        (tmp_path / "release").touch()
        cluster.client.unsubscribe_topic(TOPIC_MOVES)
    assert (tmp_path / "hung-worker-1").exists(), "worker-1 never took a second map task"
    assert not returned, "the job waited for the hung map call on worker-1"
    assert res.to_dict() == dict(expected)
    assert res.attempts == 1
    assert done["worker-0"] == 16 - done["worker-1"], dict(done)  # every split mapped once
    # the scheduler's event, delivered to subscribers on its stream
    assert _wait(lambda: len(events) > 0, 30), "no move was logged"
    keys = [e["key"][0] for e in events]  # (a tuple key travels as a list)
    # the hung map task; its worker's other waiting tasks (picks of its finished map task, a
    # reducer placed there) are moved off its busy thread too
    assert any("-map" in k and "_send-" not in k for k in keys), keys
    assert all(e["from"] != e["to"] for e in events), events
