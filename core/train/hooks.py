"""Training hooks for :class:`tensorvm.train.MonitoredSession` (TF 1.x's ``SessionRunHook``).

A hook's methods are documented no-ops; a hook overrides the ones it needs:

* ``begin()`` — once, before the session exists: add ops to the graph here;
* ``after_create_session(session, coord)`` — after the variables are initialised or restored,
  and again after every recovery from a lost device;
* ``before_run(run_context)`` -> :class:`SessionRunArgs` or None — extra fetches and feeds
  for this run;
* ``after_run(run_context, run_values)`` — ``run_values.results`` holds those fetches;
  ``run_context.request_stop()`` ends training;
* ``end(session)`` — once, when the monitored session closes normally.

>>> class CountRuns(SessionRunHook):
...     def begin(self): self.n = 0
...     def after_run(self, run_context, run_values): self.n += 1
>>> h = CountRuns(); h.begin(); h.after_run(None, None); h.n
1
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..framework.errors import InvalidArgumentError

_log = logging.getLogger("tensorvm")


@dataclass
class SessionRunArgs:
    fetches: Any = None
    feed_dict: dict | None = None
    options: Any = None


@dataclass
class SessionRunValues:
    results: Any
    options: Any = None
    run_metadata: Any = None


@dataclass
class SessionRunContext:
    original_args: SessionRunArgs
    session: Any
    stop_requested: bool = field(default=False)

    def request_stop(self) -> None:
        self.stop_requested = True


class NanLossDuringTrainingError(RuntimeError):
    """The loss was NaN (raised by :class:`NanTensorHook`)."""


class SessionRunHook:
    """Base class of training hooks (see the module docstring)."""

    def begin(self) -> None:
        pass

    def after_create_session(self, session, coord) -> None:
        pass

    def before_run(self, run_context) -> SessionRunArgs | None:
        return None

    def after_run(self, run_context, run_values) -> None:
        pass

    def end(self, session) -> None:
        pass


_GLOBAL_STEP_READ = "global_step_read_op_cache"  # TF's GLOBAL_STEP_READ_KEY


def _global_step_tensor():
    """A read of the global step, made once per graph (TF's
    ``_get_or_create_global_step_read``): hooks fetch the value its op read, not the
    variable itself, which in process reads as the step left it."""
    from .optimizers import get_global_step
    gs = get_global_step()
    if gs is None:
        raise InvalidArgumentError("this hook needs a global step "
                                   "(tv.train.get_or_create_global_step())")
    g = getattr(gs, "graph", None)
    if g is None or not hasattr(gs, "value"):
        return gs
    cached = g.get_collection(_GLOBAL_STEP_READ)
    if cached:
        return cached[0]
    if g._finalized:
        return gs
    from ..ops.array.array_ops import identity
    with g.as_default(), g.name_scope(None), g.control_dependencies(None), g.device(None):
        read = identity(gs.value(), name=f"{gs.op.name}/read_for_hooks")
    g.add_to_collection(_GLOBAL_STEP_READ, read)
    return read


class _EveryN:
    """Fires every ``steps`` global steps or every ``secs`` seconds."""

    def __init__(self, steps=None, secs=None, clock=time.monotonic):
        if (steps is None) == (secs is None):
            raise InvalidArgumentError("give exactly one of every N steps or every N seconds")
        self.steps, self.secs, self.clock = steps, secs, clock
        self.last_step, self.last_time = None, None

    def due(self, step: int) -> bool:
        if self.last_step is None:
            return True
        if self.steps is not None:
            return step >= self.last_step + self.steps
        return self.clock() - self.last_time >= self.secs

    def mark(self, step: int) -> None:
        self.last_step, self.last_time = step, self.clock()


class StopAtStepHook(SessionRunHook):
    """Stop at global step ``last_step``, or ``num_steps`` steps after the session started."""

    def __init__(self, num_steps: int | None = None, last_step: int | None = None):
        if (num_steps is None) == (last_step is None):
            raise InvalidArgumentError("StopAtStepHook: give one of num_steps and last_step")
        self._num_steps, self._last_step = num_steps, last_step

    def begin(self):
        self._gs = _global_step_tensor()

    def after_create_session(self, session, coord):
        if self._last_step is None:
            self._last_step = int(session.run(self._gs)) + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._gs)

    def after_run(self, run_context, run_values):
        # the fetched value may be from before this run's increment: read again when close
        if int(run_values.results) + 1 >= self._last_step and \
                int(run_context.session.run(self._gs)) >= self._last_step:
            run_context.request_stop()


class CheckpointSaverListener:
    """Called around the saves of a :class:`CheckpointSaverHook` (TF 1.x's
    ``tf.train.CheckpointSaverListener``): ``begin()``, ``before_save(session, step)``,
    ``after_save(session, step)`` (a true result asks training to stop) and
    ``end(session, step)``; each a documented no-op."""

    def begin(self) -> None:
        pass

    def before_save(self, session, global_step_value) -> None:
        pass

    def after_save(self, session, global_step_value):
        pass

    def end(self, session, global_step_value) -> None:
        pass


class CheckpointSaverHook(SessionRunHook):
    """Save a checkpoint every ``save_steps`` global steps or ``save_secs`` seconds, at the
    start (when the folder has none) and at the end. ``listeners`` are
    :class:`CheckpointSaverListener` objects, or callables ``(session, step, path)`` called
    after each save."""

    def __init__(self, checkpoint_dir: str, save_secs=None, save_steps=None, saver=None,
                 checkpoint_basename: str = "model.ckpt", scaffold=None, listeners=None):
        self._dir = checkpoint_dir.rstrip("/")
        self._every = _EveryN(save_steps, save_secs)
        self._saver, self._scaffold = saver, scaffold
        self._base = checkpoint_basename
        self._listeners = list(listeners or [])
        self.saved: list[int] = []

    def begin(self):
        self._gs = _global_step_tensor()
        for listener in self._listeners:
            if isinstance(listener, CheckpointSaverListener):
                listener.begin()
        if self._saver is None:
            self._saver = self._scaffold.saver if self._scaffold is not None else None
        if self._saver is None:
            from .saver import Saver
            self._saver = Saver()

    def after_create_session(self, session, coord):
        from .saver import latest_checkpoint
        step = int(session.run(self._gs))
        if latest_checkpoint(self._dir) is None:
            self._save(session, step)
        self._every.mark(step)

    def before_run(self, run_context):
        return SessionRunArgs(self._gs)

    def after_run(self, run_context, run_values):
        if self._every.due(int(run_values.results) + 1):  # fetched before the increment
            step = int(run_context.session.run(self._gs))
            if self._every.due(step):
                self._save(run_context.session, step, run_context)
                self._every.mark(step)

    def end(self, session):
        step = int(session.run(self._gs))
        if not self.saved or self.saved[-1] != step:
            self._save(session, step)
        for listener in self._listeners:
            if isinstance(listener, CheckpointSaverListener):
                listener.end(session, step)

    def _save(self, session, step: int, run_context=None) -> None:
        for listener in self._listeners:
            if isinstance(listener, CheckpointSaverListener):
                listener.before_save(session, step)
        path = self._saver.save(session, f"{self._dir}/{self._base}", global_step=step)
        self.saved.append(step)
        _log.info("saved checkpoint %s", path)
        stop = False
        for listener in self._listeners:
            if isinstance(listener, CheckpointSaverListener):
                stop = bool(listener.after_save(session, step)) or stop
            else:
                listener(session, step, path)
        if stop and run_context is not None:
            _log.info("a CheckpointSaverListener asked to stop training")
            run_context.request_stop()


class LoggingTensorHook(SessionRunHook):
    """Log the values of ``tensors`` (a dict name -> tensor, or a list) every
    ``every_n_iter`` runs or ``every_n_secs`` seconds (logger ``tensorvm``, INFO)."""

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False,
                 formatter=None):
        self._tensors = tensors if isinstance(tensors, dict) else \
            {getattr(t, "name", str(t)): t for t in tensors}
        self._every = _EveryN(every_n_iter, every_n_secs)
        self._iter, self._at_end, self._formatter = 0, at_end, formatter
        self.logged: list[dict] = []

    def before_run(self, run_context):
        return SessionRunArgs(self._tensors) if self._every.due(self._iter) else None

    def after_run(self, run_context, run_values):
        if run_values.results is not None:
            self._log(run_values.results)
            self._every.mark(self._iter)
        self._iter += 1

    def end(self, session):
        if self._at_end:
            self._log(session.run(self._tensors))

    def _log(self, values: dict) -> None:
        self.logged.append(values)
        text = self._formatter(values) if self._formatter else \
            ", ".join(f"{k} = {v}" for k, v in values.items())
        _log.info("%s", text)


class NanTensorHook(SessionRunHook):
    """Fail (``NanLossDuringTrainingError``) or stop when ``loss_tensor`` is NaN."""

    def __init__(self, loss_tensor, fail_on_nan_loss: bool = True):
        self._loss, self._fail = loss_tensor, fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        if np.any(np.isnan(run_values.results)):
            if self._fail:
                raise NanLossDuringTrainingError("NaN loss during training.")
            _log.warning("NaN loss during training; stopping")
            run_context.request_stop()


class SummarySaverHook(SessionRunHook):
    """Write summaries as TensorBoard event files in ``output_dir`` every ``save_steps``
    global steps or ``save_secs`` seconds (TF 1.x's signature). ``summary_op`` is a summary
    op (or a list of them, ``tv.summary.merge_all()``, or ``scaffold.summary_op``) whose
    serialized ``Summary`` is written with ``summary_writer`` (default: a
    ``tv.summary.FileWriter`` on ``output_dir``); ``scalars`` (name -> scalar tensor,
    tensorvm's shortcut) writes those values with tensorboardX's ``SummaryWriter``."""

    def __init__(self, save_steps=None, save_secs=None, output_dir=None, summary_writer=None,
                 scaffold=None, summary_op=None, scalars=None):
        if scaffold is not None and summary_op is None:
            summary_op = getattr(scaffold, "summary_op", None)
        if not scalars and summary_op is None:
            raise InvalidArgumentError("SummarySaverHook needs summary_op (or scaffold with a "
                                       "summary_op, or scalars={name: tensor})")
        if output_dir is None and summary_writer is None:
            raise InvalidArgumentError("SummarySaverHook: pass output_dir or summary_writer")
        self._every = _EveryN(save_steps, save_secs)
        self._dir, self._writer = output_dir, summary_writer
        self._scalars = dict(scalars or {})
        self._op = summary_op

    def begin(self):
        self._gs = _global_step_tensor()
        if self._writer is None:
            if self._op is not None:
                from ..tf_api.summary import FileWriter
                self._writer = FileWriter(self._dir)
            else:
                from tensorboardX import SummaryWriter
                self._writer = SummaryWriter(self._dir)
        self._next_step = None

    def before_run(self, run_context):
        # TF's rule: ask for the summary only when the step this run makes is due
        self._request = self._next_step is None or self._every.due(self._next_step)
        fetch = {"step": self._gs}
        if self._request:
            fetch["values"] = self._scalars
            if self._op is not None:
                fetch["summary"] = self._op
        return SessionRunArgs(fetch)

    def after_run(self, run_context, run_values):
        step = int(run_values.results["step"]) + 1  # fetched before the increment, or not
        if self._request or self._next_step is None:
            step = int(run_context.session.run(self._gs))
        if self._request:
            for k, v in run_values.results["values"].items():
                self._writer.add_scalar(k, float(v), step)
            summary = run_values.results.get("summary")
            if summary is not None:
                for s in summary if isinstance(summary, (list, tuple)) else [summary]:
                    self._writer.add_summary(s, step)
            self._every.mark(step)
        self._next_step = step + 1

    def end(self, session):
        self._writer.flush()


class StepCounterHook(SessionRunHook):
    """Training metrics every ``every_n_steps`` global steps: global step, steps/s,
    examples/s (with ``batch_size``, examples per global step) and ``loss``; logged, kept in
    ``metrics``, and sent to the job registry of the Dask dashboard when the session runs on
    a cluster (:mod:`tensorvm.scheduler_ext`, message ``metrics`` on its job topic)."""

    def __init__(self, every_n_steps: int = 100, batch_size: int | None = None, loss=None,
                 job: str | None = None, total_steps: int | None = None,
                 clock=time.monotonic):
        self._every = _EveryN(every_n_steps, None)
        self._batch, self._loss, self._job, self._total = batch_size, loss, job, total_steps
        self._clock = clock
        self.metrics: list[dict] = []
        self._client = None

    def begin(self):
        self._gs = _global_step_tensor()

    def after_create_session(self, session, coord):
        self._t0, self._s0 = self._clock(), int(session.run(self._gs))
        self._every.mark(self._s0)
        self._client = getattr(session, "client", None)
        if self._client is not None and self._job:
            self._send("start", name=self._job, kind="training",
                       client=getattr(self._client, "id", None))

    def before_run(self, run_context):
        return SessionRunArgs({"step": self._gs, **({"loss": self._loss}
                                                    if self._loss is not None else {})})

    def after_run(self, run_context, run_values):
        step = int(run_values.results["step"])
        if not self._every.due(step):
            return
        now = self._clock()
        dt = max(now - self._t0, 1e-9)
        m = {"step": step, "steps_per_s": (step - self._s0) / dt}
        if self._batch:
            m["examples_per_s"] = m["steps_per_s"] * self._batch
        if "loss" in run_values.results:
            loss = float(run_values.results["loss"])
            if math.isfinite(loss):
                m["loss"] = loss
        if self._total:
            m["total_steps"] = self._total
        self.metrics.append(m)
        from ..runtime.job_api import report
        report(**m)  # the CLI's progress display and dashboard, inside a tensorvm job
        _log.info("global step %d: %.1f steps/s%s", step, m["steps_per_s"],
                  f", loss {m['loss']:.5g}" if "loss" in m else "")
        self._send("metrics", **m)
        self._t0, self._s0 = now, step
        self._every.mark(step)

    def end(self, session):
        self._send("finish", state="done")

    def _send(self, op: str, **fields) -> None:
        if self._client is None or not self._job:
            return
        try:
            from ..runtime.direct.step_reports import flush_step_reports
            from ..runtime.job_api import TOPIC_JOBS
            flush_step_reports(self._client)  # the job's steps reach the registry first
            # scheduler_ext.registry.job_message's form (core never imports scheduler_ext)
            self._client.log_event(TOPIC_JOBS, {"op": op, "job": self._job, **fields})
        except Exception:  # noqa: BLE001 - metrics never stop training
            _log.debug("could not send training metrics", exc_info=True)


class SecondOrStepTimer:
    """TF's timer of hooks: triggers every ``every_secs`` seconds or ``every_steps`` steps
    (exactly one of them)."""

    def __init__(self, every_secs=None, every_steps=None):
        self._every = _EveryN(every_steps, every_secs)
        self._last_triggered_step = None

    def reset(self) -> None:
        """Forget the last trigger."""
        self._every.last_step = self._every.last_time = None
        self._last_triggered_step = None

    def should_trigger_for_step(self, step: int) -> bool:
        """Whether ``step`` is due (never the step that last triggered)."""
        if self._last_triggered_step == step:
            return False
        return self._every.due(step)

    def update_last_triggered_step(self, step: int):
        """Mark ``step`` as triggered; returns ``(elapsed seconds, elapsed steps)`` since the
        previous trigger (``(None, None)`` the first time)."""
        t, s = self._every.last_time, self._every.last_step
        self._every.mark(step)
        self._last_triggered_step = step
        if t is None:
            return None, None
        return self._every.clock() - t, step - s

    def last_triggered_step(self):
        """The step that last triggered, or ``None``."""
        return self._last_triggered_step


class FinalOpsHook(SessionRunHook):
    """Run ``final_ops`` (a tensor, list or dict) when the session ends; their values are
    ``final_ops_values`` (TF's hook, used by evaluations)."""

    def __init__(self, final_ops, final_ops_feed_dict=None):
        self._final_ops, self._feed = final_ops, final_ops_feed_dict
        self._values = None

    @property
    def final_ops_values(self):
        """The values fetched at the end (``None`` before)."""
        return self._values

    def end(self, session):
        """Fetch the final ops."""
        if self._final_ops is not None:
            self._values = session.run(self._final_ops, self._feed)


class FeedFnHook(SessionRunHook):
    """Feed ``feed_fn()`` (a dict placeholder -> value) into every run."""

    def __init__(self, feed_fn):
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        """The feeds of this run."""
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


class GlobalStepWaiterHook(SessionRunHook):
    """Hold each run until the global step reaches ``wait_until_step`` (another worker trains
    it there); TF's hook for staggered workers."""

    def __init__(self, wait_until_step, poll_secs: float = 0.5, sleep=time.sleep):
        self._wait_until_step = int(wait_until_step)
        self._poll, self._sleep = poll_secs, sleep
        self._done = self._wait_until_step <= 0

    def begin(self):
        """Find the global step."""
        self._gs = _global_step_tensor()

    def before_run(self, run_context):
        """Wait (polling the global step) until it is reached, once."""
        while not self._done:
            step = int(run_context.session.run(self._gs))
            if step >= self._wait_until_step:
                self._done = True
                break
            _log.info("Waiting for global step %d before starting training (now %d)",
                      self._wait_until_step, step)
            self._sleep(self._poll)


class SyncReplicasHook(SessionRunHook):
    """Set up a :class:`SyncReplicasOptimizer` replica: the local step on every worker, and
    on the chief the accumulators, the token gate and the chief's runner thread."""

    def __init__(self, opt, is_chief: bool):
        self._opt, self._chief = opt, is_chief
        self._runner = None

    def after_create_session(self, session, coord):
        if self._chief:
            if self._runner is not None:
                self._runner.stop()
            session.run(self._opt.chief_init_op)
            self._runner = self._opt.get_chief_queue_runner().start(session)
        session.run(self._opt.local_step_init_op)

    def end(self, session):
        if self._runner is not None:
            self._runner.stop(session)
