"""``tv.estimator.experimental``: early stopping (TF 1.x's ``stop_if_no_decrease_hook`` and
its kin). A hook checks the evaluation summaries in ``eval_dir`` (default: the estimator's
``eval`` folder) every ``run_every_secs`` seconds or ``run_every_steps`` steps and stops
training when its predicate holds — typically with ``train_and_evaluate``, whose evaluations
write those summaries.

>>> import tensorvm as tv
>>> from tensorvm.estimator.summary_io import write_dict_to_summary
>>> for step, loss in [(10, 0.5), (20, 0.4), (30, 0.45), (40, 0.41)]:
...     write_dict_to_summary("memory://tvm-doc-early/eval", {"loss": loss}, step)
>>> dict(tv.estimator.experimental.read_eval_metrics("memory://tvm-doc-early/eval"))[20]
{'loss': 0.4000000059604645}
"""
from __future__ import annotations

import collections
import logging
import operator

from ..train.hooks import SessionRunArgs, SessionRunHook, _EveryN, _global_step_tensor

_log = logging.getLogger("tensorvm")

__all__ = ["make_early_stopping_hook", "read_eval_metrics", "stop_if_higher_hook",
           "stop_if_lower_hook", "stop_if_no_decrease_hook", "stop_if_no_increase_hook"]


def read_eval_metrics(eval_dir: str) -> collections.OrderedDict:
    """``{global step: {metric: value}}`` of the scalar summaries in ``eval_dir``, by step."""
    from .summary_io import read_scalars
    try:
        scalars = read_scalars(eval_dir)
    except FileNotFoundError:
        scalars = []
    out: dict = collections.defaultdict(dict)
    for step, tag, value in scalars:
        out[step][tag] = value
    return collections.OrderedDict(sorted(out.items()))


class _StopOnPredicateHook(SessionRunHook):
    """Request a stop when ``should_stop_fn()`` is true, asked every N steps or seconds."""

    def __init__(self, should_stop_fn, run_every_secs=60, run_every_steps=None):
        if not callable(should_stop_fn):
            raise TypeError("`should_stop_fn` must be callable.")
        self._fn = should_stop_fn
        self._every = _EveryN(run_every_steps, None if run_every_steps else run_every_secs)

    def begin(self):
        """Find the global step."""
        self._gs = _global_step_tensor()

    def before_run(self, run_context):
        """Fetch the global step."""
        return SessionRunArgs(self._gs)

    def after_run(self, run_context, run_values):
        """Ask the predicate when due; stop when it holds."""
        step = int(run_values.results)
        if self._every.due(step):
            self._every.mark(step)
            if self._fn():
                _log.info("Requesting early stopping at global step %d", step)
                run_context.request_stop()


def make_early_stopping_hook(estimator, should_stop_fn, run_every_secs=60,
                             run_every_steps=None):
    """A training hook that stops when ``should_stop_fn()`` returns true."""
    from .estimator import Estimator
    if not isinstance(estimator, Estimator):
        raise TypeError("`estimator` must have type `tf.estimator.Estimator`. Got: "
                        f"{type(estimator)}")
    if run_every_secs is not None and run_every_steps is not None:
        raise ValueError("Only one of `run_every_secs` and `run_every_steps` must be set.")
    return _StopOnPredicateHook(should_stop_fn, run_every_secs, run_every_steps)


def _threshold_hook(estimator, metric_name, threshold, higher_is_better, eval_dir,
                    min_steps, run_every_secs, run_every_steps):
    eval_dir = eval_dir or estimator.eval_dir()
    better = operator.gt if higher_is_better else operator.lt

    def crossed():
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step >= min_steps and better(metrics[metric_name], threshold):
                _log.info('At step %s, metric "%s" has value %s which is %s the configured '
                          "threshold (%s) for early stopping.", step, metric_name,
                          metrics[metric_name], "greater than" if higher_is_better
                          else "less than", threshold)
                return True
        return False

    return make_early_stopping_hook(estimator, crossed, run_every_secs, run_every_steps)


def _no_improvement_hook(estimator, metric_name, max_steps, higher_is_better, eval_dir,
                         min_steps, run_every_secs, run_every_steps):
    eval_dir = eval_dir or estimator.eval_dir()
    better = operator.gt if higher_is_better else operator.lt

    def stalled():
        best, best_step = None, None
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step < min_steps:
                continue
            val = metrics[metric_name]
            if best is None or better(val, best):
                best, best_step = val, step
            if step - best_step >= max_steps:
                _log.info('No %s in metric "%s" for %s steps, which is greater than or equal '
                          "to max steps (%s) configured for early stopping.",
                          "increase" if higher_is_better else "decrease", metric_name,
                          step - best_step, max_steps)
                return True
        return False

    return make_early_stopping_hook(estimator, stalled, run_every_secs, run_every_steps)


def stop_if_higher_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0,
                        run_every_secs=60, run_every_steps=None):
    """Stop once an evaluation (at step >= ``min_steps``) has ``metric_name`` above
    ``threshold``."""
    return _threshold_hook(estimator, metric_name, threshold, True, eval_dir, min_steps,
                           run_every_secs, run_every_steps)


def stop_if_lower_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0,
                       run_every_secs=60, run_every_steps=None):
    """Stop once an evaluation has ``metric_name`` below ``threshold``."""
    return _threshold_hook(estimator, metric_name, threshold, False, eval_dir, min_steps,
                           run_every_secs, run_every_steps)


def stop_if_no_increase_hook(estimator, metric_name, max_steps_without_increase,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
    """Stop when ``metric_name`` has not risen above its best for
    ``max_steps_without_increase`` global steps of evaluations."""
    return _no_improvement_hook(estimator, metric_name, max_steps_without_increase, True,
                                eval_dir, min_steps, run_every_secs, run_every_steps)


def stop_if_no_decrease_hook(estimator, metric_name, max_steps_without_decrease,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
    """Stop when ``metric_name`` has not fallen below its best for
    ``max_steps_without_decrease`` global steps of evaluations."""
    return _no_improvement_hook(estimator, metric_name, max_steps_without_decrease, False,
                                eval_dir, min_steps, run_every_secs, run_every_steps)
