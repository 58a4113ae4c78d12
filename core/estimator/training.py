"""``TrainSpec``, ``EvalSpec`` and ``train_and_evaluate``: train with evaluations after the
checkpoints, in this process, one after the other (TF 1.x's local mode).

>>> import tensorvm as tv
>>> tv.estimator.EvalSpec(input_fn=lambda: None, steps=None).throttle_secs
600
"""
from __future__ import annotations

import collections
import logging
import time

from ..train.hooks import CheckpointSaverListener, SessionRunHook

_log = logging.getLogger("tensorvm")

__all__ = ["EvalSpec", "TrainSpec", "train_and_evaluate"]


def _hooks(hooks):
    hooks = tuple(hooks or ())
    for h in hooks:
        if not isinstance(h, SessionRunHook):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {h}")
    return hooks


class TrainSpec(collections.namedtuple("TrainSpec", ["input_fn", "max_steps", "hooks"])):
    """What ``train_and_evaluate`` trains on: ``input_fn``, up to global step
    ``max_steps`` (``None``: until the input ends), with ``hooks``."""

    def __new__(cls, input_fn, max_steps=None, hooks=None):
        if not callable(input_fn):
            raise TypeError(f"`input_fn` must be callable, given: {input_fn}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        return super().__new__(cls, input_fn, max_steps, _hooks(hooks))


class EvalSpec(collections.namedtuple("EvalSpec", [
        "input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs",
        "throttle_secs"])):
    """What ``train_and_evaluate`` evaluates: ``input_fn`` for ``steps`` batches (``None``:
    the whole input), under ``name``, at most every ``throttle_secs`` seconds (a checkpoint
    saved sooner is not evaluated; the last one always is). ``exporters`` are called with
    each evaluation's result."""

    def __new__(cls, input_fn, steps=100, name=None, hooks=None, exporters=None,
                start_delay_secs=120, throttle_secs=600):
        if not callable(input_fn):
            raise TypeError(f"`input_fn` must be callable, given: {input_fn}")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be string, given: {name}")
        if start_delay_secs < 0:
            raise ValueError(f"Must specify start_delay_secs >= 0, given: {start_delay_secs}")
        if throttle_secs < 0:
            raise ValueError(f"Must specify throttle_secs >= 0, given: {throttle_secs}")
        if exporters is None:
            exporters = ()
        elif not isinstance(exporters, (list, tuple)):
            exporters = (exporters,)
        return super().__new__(cls, input_fn, steps, name, _hooks(hooks), tuple(exporters),
                               start_delay_secs, throttle_secs)


class _EvaluateAfterSave(CheckpointSaverListener):
    """Evaluate after each checkpoint save (not one of the step training starts from: the
    untrained or already evaluated model), at most every ``throttle_secs``, and at the end
    when the last step was not evaluated."""

    def __init__(self, estimator, eval_spec, start_step: int, clock=time.monotonic):
        self._est, self._spec, self._clock = estimator, eval_spec, clock
        self._start_step = start_step
        self.eval_result, self.export_results = None, None
        self._last_step, self._last_time = None, None

    def after_save(self, session, global_step_value):
        if global_step_value == self._start_step:
            return
        if self._last_time is None or \
                self._clock() - self._last_time >= self._spec.throttle_secs:
            self._evaluate(global_step_value)
        else:
            _log.info("Skip the current checkpoint eval due to throttle secs (%s secs).",
                      self._spec.throttle_secs)

    def end(self, session, global_step_value):
        if global_step_value != self._last_step:
            self._evaluate(global_step_value)

    def _evaluate(self, step):
        self._last_step, self._last_time = step, self._clock()
        self.export_results = self.export_results or []
        self.eval_result = self._est.evaluate(self._spec.input_fn, steps=self._spec.steps,
                                              hooks=self._spec.hooks, name=self._spec.name)
        for exporter in self._spec.exporters:
            self.export_results.append(exporter.export(
                self._est, f"{self._est.model_dir}/export/{exporter.name}",
                self._est.latest_checkpoint(), self.eval_result, False))


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Train ``estimator`` on ``train_spec`` and evaluate it on ``eval_spec`` after the
    checkpoints (``RunConfig.save_checkpoints_steps``/``_secs``) and at the end; returns
    ``(the last evaluation's metrics, the exporters' results)``, both ``None`` when nothing
    was trained (``max_steps`` already reached), as TF's."""
    from ..train.checkpoint_utils import global_step_of
    from .estimator import Estimator
    if not isinstance(estimator, Estimator):
        raise TypeError(f"`estimator` must have type `tf.estimator.Estimator`, given "
                        f"{type(estimator)}")
    if not isinstance(train_spec, TrainSpec):
        raise TypeError(f"`train_spec` must have type `tf.estimator.TrainSpec`. Got: "
                        f"{type(train_spec)}")
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(f"`eval_spec` must have type `tf.estimator.EvalSpec`. Got: "
                        f"{type(eval_spec)}")
    cfg = estimator.config
    _log.info("Start train and evaluate loop. The evaluate will happen after every "
              "checkpoint. Checkpoint frequency is determined based on RunConfig arguments: "
              "save_checkpoints_steps %s or save_checkpoints_secs %s.",
              cfg.save_checkpoints_steps, cfg.save_checkpoints_secs)
    listener = _EvaluateAfterSave(estimator, eval_spec, global_step_of(estimator.model_dir))
    estimator.train(train_spec.input_fn, hooks=list(train_spec.hooks),
                    max_steps=train_spec.max_steps, saving_listeners=[listener])
    return listener.eval_result, listener.export_results
