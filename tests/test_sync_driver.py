"""The driver of ``run_replicas(sync=True)`` on the ClusterCoordinator
(:func:`tensorvm.train.elastic_replicas.run_sync`), in process and deterministic: the real
driver, closures (``_Replicas.closure``'s ``train``), ``w_run``, chief loop (``_SyncChief``,
``ChiefRunner``) and protocol machines (:mod:`tensorvm.train.sync_state`), with the
coordinator, the PS and each worker's MonitoredSession replaced by small in-process fakes that
run the same protocol (apply a gradient with the closure's step token, wait for a token; the
chief takes N gradients and releases the next step).

The hang these reproduce (``test_ps_cluster``'s kill test under load timed out with this
picture): the driver kept six closures in a window and waited for the *oldest*. A sync closure
ends only when its step is applied, which needs the gradients of other closures. When the
oldest had its gradient accepted and waited for a partner, while every later closure of the
window ended without bringing one — one of them failed (the queue then cancels the others) or
ended the run (its input ran out: the stop flag, so the rest return at once) — nothing was left
queued or running: the chief waited for the step's second gradient, the oldest closure for the
chief, and the driver for the oldest closure, for ever (it closes the chief loop, which lets
waiting workers go, only after the oldest closure returns).

Failures first: on the driver that waits for the oldest closure both tests hang (each bounds
the wait and fails, then unblocks the fake PS).
"""
from __future__ import annotations

import threading

import numpy as np

import tensorvm.train.elastic_replicas as er
from tensorvm.framework.errors import InvalidArgumentError, OutOfRangeError
from tensorvm.runtime.cluster.spec import ClusterSpec
from tensorvm.train import sync_state
from tensorvm.train.remote_value import Closure, ClosureQueue
from tensorvm.train.replicas import _Settings
from tensorvm.train.sync_replicas import COUNTS, ChiefRunner

HANG_S = 60.0  # only the failure path waits this long: the fixed driver ends in milliseconds


class _PS:
    """The parameter server: the accumulator, the token gate, the global step and each
    worker's local step, one condition (as the ops' resources)."""

    def __init__(self, n_required: int):
        self.acc = sync_state.GradientAccumulator(n_required, ("dense",))
        self.gate = sync_state.TokenGate()
        self.gs = 0
        self.local: dict = {}
        self.cond = threading.Condition()
        self.token_waits_ended: list = []  # (task, how) of every token wait that ended

    def wait(self, attempt):
        with self.cond:
            while True:
                out = attempt()
                if out is not None:
                    self.cond.notify_all()
                    return out
                self.cond.wait()

    def close(self):
        with self.cond:
            self.acc.close()
            self.gate.close()
            self.cond.notify_all()


class _ChiefSession:
    """The coordinator's own session: the chief loop's ops on the PS."""

    def __init__(self, ps: _PS):
        self.ps = ps

    def run(self, op, feed_dict=None, options=None, steps: int = 1):
        ps = self.ps
        if op == "chief_init":
            with ps.cond:
                ps.acc.set_step(ps.gs)
                ps.gate.restart(ps.gs, er.UNLIMITED_TOKENS)
                ps.cond.notify_all()
        elif op == "chief_train":
            since: list = []

            def attempt():
                got = ps.acc.take(ps.gs, since[0] if since else None)
                if got is None and not since:
                    since.append(ps.acc.generation)
                return got
            ps.wait(attempt)
            with ps.cond:
                ps.gs += 1
                ps.gate.release(ps.gs, er.UNLIMITED_TOKENS)
                ps.cond.notify_all()
        elif op == "close":
            ps.close()
        elif op == "global_step":
            return ps.gs
        elif op == "counts":
            m = ps.acc
            return np.array([m.accepted, m.taken] + [m.dropped[k] for k in COUNTS[2:]])
        return None


class _Opt:
    """What the driver and the chief loop read of a SyncReplicasOptimizer."""

    chief_init_op, counts, step_token, local_step_init_op = \
        "chief_init", "counts", "step_token", "local_step_init"

    def __init__(self, n_required):
        self.n = n_required

    def get_chief_queue_runner(self):
        return ChiefRunner("chief_train", "close", 1, None, replicas_to_aggregate=self.n)


class _WorkerSession:
    """A worker's own session: only the local step's initialiser."""

    def __init__(self, ps, task):
        self.ps, self.task = ps, task

    def run(self, op, *a, **kw):
        assert op == "local_step_init"
        with self.ps.cond:
            self.ps.local[self.task] = self.ps.gs


class _Monitored:
    """A worker's MonitoredSession: one replica step of the protocol — apply the gradient
    tagged with the fed step token at the local step, then wait for a token (a twin does
    not wait) — after ``script(seq)``, which may block or raise (``seq``: the closure's
    number in the coordinator's schedule)."""

    def __init__(self, ps, task, script):
        self.ps, self.task, self.script = ps, task, script

    def run(self, fetches, feeds=None, options=None, steps: int = 1):
        ps, task = self.ps, self.task
        token = feeds["step_token"]
        self.script(int(token.split(b"/")[0].rsplit(b"-", 1)[1]))
        local = ps.local[task]
        tok = token + b"#0"
        decision = ps.wait(lambda: ps.acc.apply(local, [np.ones(1)], None, tok))
        if decision == sync_state.DUPLICATE:
            return [None, ps.gs]
        since: list = []

        def attempt():
            got = ps.gate.try_take(local, since[0] if since else None)
            if got is None and not since:
                since.append(ps.gate.restarts)
            return got
        try:
            ps.local[task] = ps.wait(attempt)
        except OutOfRangeError:
            ps.token_waits_ended.append((task, "closed"))
            raise
        ps.token_waits_ended.append((task, "released"))
        return [None, ps.gs]

    def should_stop(self):
        return False

    def close(self):
        pass


class _Worker:
    def __init__(self, ps, task, n_required):
        self.task, self.name = task, f"worker-{task}"
        self.model = {"_sync": _Opt(n_required), "train_op": "train_op",
                      "global_step": "global_step", "_opts": None, "hooks": []}
        self.once, self._token, self._runs = None, None, 0
        self.session = _WorkerSession(ps, task)


class _Coordinator:
    """The ClusterCoordinator's surface the driver uses: a real ClosureQueue taken by one
    thread per worker (closure tokens ``c-<seq>``), the chief loop started on init."""

    def __init__(self, ps, n_workers, n_required, after_state_init, after_worker_init):
        self.ps, self.recoveries, self.worker_losses = ps, 0, 0
        self._queue, self._seq = ClosureQueue(), 0
        self._workers = {k: _Worker(ps, k, n_required) for k in range(n_workers)}
        self.chief = self._workers[0]
        self.sess = _ChiefSession(ps)
        after_state_init(self, self.sess)
        for w in self._workers.values():
            after_worker_init(w)
        self._threads = [threading.Thread(target=self._serve, args=(w,), daemon=True)
                         for w in self._workers.values()]
        for t in self._threads:
            t.start()

    def _serve(self, w):
        while True:
            c = self._queue.get()
            if c is None:
                return
            w._token, w._runs = c.token, 0
            try:
                value = c.fn(w)
            except BaseException as exc:  # noqa: BLE001 - as the coordinator: "error"
                self._queue.failed(c, exc)
            else:
                self._queue.finished(c, value, w.name)

    def schedule(self, fn):
        token = b"c-%d" % self._seq
        self._seq += 1
        return self._queue.put(Closure(fn, (), {}, token))

    def join(self):
        self._queue.join()

    def done(self):
        return self._queue.done()

    def wait_any(self, values, timeout=None, at_least=1):  # ClusterCoordinator.wait_any's
        return self._queue.wait_any(values, timeout, at_least)

    def workers(self):
        return dict(self._workers)

    def num_workers(self):
        return len(self._workers)

    def run_on_chief(self, fetch):
        return self.sess.run(fetch)

    def counters(self):
        return {}

    def close(self):
        self._queue.close("close() was called")
        for t in self._threads:
            t.join()


def _run_sync(monkeypatch, make_script, n_workers=2, n_required=2):
    """``run_sync`` on the fakes (``make_script(ps)``: each worker step's script), in a
    thread; ``(its result or error, ps)``. On a hang (the old driver) the PS is closed, which
    ends every wait, and the test fails."""
    ps = _PS(n_required)
    script = make_script(ps)

    def coordinator(session, model_fn, *, after_state_init, after_worker_init, **kw):
        return _Coordinator(ps, n_workers, n_required, after_state_init, after_worker_init)
    monkeypatch.setattr(er, "ClusterCoordinator", coordinator)
    monkeypatch.setattr(er._Replicas, "session",
                        lambda self, coord, w: self.sessions.setdefault(
                            w.task, _Monitored(ps, w.task, script)))
    settings = _Settings(sync=True, last_step=100, steps_per_run=1, checkpoint_dir=None,
                         save_checkpoint_steps=None, final=None, job_name=None,
                         slow_workers=None, log_step_count_steps=0, max_recoveries=0,
                         monitor=None, monitor_every=100, plane="direct")
    out: list = []

    def go():
        try:
            out.append(er.run_sync(None, ClusterSpec({"ps": 1, "worker": n_workers}), None,
                                   settings, None, None, None, n_required))
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            out.append(exc)
    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(HANG_S)
    hung = t.is_alive()
    if hung:
        ps.close()
        t.join(HANG_S)
    assert not hung, ("the driver waited for a closure whose step no closure could complete "
                      f"(token waits ended: {ps.token_waits_ended})")
    return out[0], ps


FIRST = 2  # the first training closure, c-2 (c-0 and c-1: each worker's prepare closure)


def _after_the_first_gradient(ps, error):
    """The script: the first training closure runs its step; any other waits until that
    gradient is accepted, then raises ``error``."""
    def script(seq):
        if seq == FIRST:
            return
        with ps.cond:
            ps.cond.wait_for(lambda: ps.acc.accepted >= 1)
        raise error
    return script


def test_a_closure_that_ends_the_run_lets_the_oldest_waiting_closure_go(monkeypatch):
    """Two workers, two gradients a step. The first training closure (the oldest) has its
    gradient accepted and waits for the step; the next one's input runs out
    (OutOfRangeError: the run's stop flag) once that gradient is in, so every later closure
    returns at once. The driver closes the chief loop then (the waiting closure ends
    quietly); it used to wait for the oldest closure first, for ever."""
    result, ps = _run_sync(monkeypatch, lambda ps: _after_the_first_gradient(
        ps, OutOfRangeError("the replica's input ended")))
    assert not isinstance(result, BaseException), repr(result)
    gs, _, runs, recoveries, _, _, _, counters = result
    # no step was applied (one gradient of two); the close let the waiting worker go
    assert gs == 0 and ps.gs == 0 and recoveries == 0
    assert counters["accepted"] == 1 and counters["taken"] == 0
    assert [how for _, how in ps.token_waits_ended] == ["closed"]
    assert runs == [0, 0]  # no closure returned a step


def test_a_failed_closure_is_raised_while_the_oldest_waits_for_its_step(monkeypatch):
    """As above, but the second closure fails (an error in the replica's step): the queue
    cancels the queued closures, so none will bring the oldest one's partner gradient. The
    driver raises that error (not the CancelledError of a closure it cancelled) at once; it
    used to wait for the oldest closure for ever."""
    result, ps = _run_sync(monkeypatch, lambda ps: _after_the_first_gradient(
        ps, InvalidArgumentError("the batch has 3 columns, w has 4")))
    assert isinstance(result, InvalidArgumentError), repr(result)
    assert str(result) == "the batch has 3 columns, w has 4"
    # the run's end let the waiting worker go; no step was applied
    assert [how for _, how in ps.token_waits_ended] == ["closed"]
    assert ps.acc.accepted == 1 and ps.acc.taken == 0 and ps.gs == 0
