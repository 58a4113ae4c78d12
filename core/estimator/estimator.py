"""``tv.estimator.Estimator``: TF 1.x's high-level training loop around a ``model_fn``.

Design
------
Each of ``train``, ``evaluate`` and ``predict`` builds a fresh :class:`tensorvm.Graph`: the
graph's seed is ``RunConfig.tf_random_seed``, the global step is created, ``input_fn`` is
called (a ``tv.data.Dataset`` gets an initializable iterator started by a hook; a tuple is
``(features, labels)``), then ``model_fn(features, labels, mode, params, config)`` (only the
arguments it names) returns an :class:`EstimatorSpec`. A :class:`tensorvm.train.
MonitoredSession` on a new :class:`tensorvm.Session` (``RunConfig.session_config``) restores
the latest checkpoint of ``model_dir`` (or initialises, warm-starting when asked) and runs the
loop until a hook stops it or the input ends (``OutOfRangeError``).

* ``train`` runs ``[train_op, loss]``; hooks: a ``StopAtStepHook`` for ``steps`` (counted from
  the restored step) or ``max_steps`` (absolute: already reached, nothing runs), a
  ``NanTensorHook``, a ``LoggingTensorHook`` and a ``StepCounterHook`` every
  ``log_step_count_steps``, a ``SummarySaverHook`` of ``tv.summary.merge_all()`` (a ``loss``
  scalar is added) every ``save_summary_steps`` into ``model_dir``, and the chief's
  ``CheckpointSaverHook`` (``save_checkpoints_steps``/``_secs``, ``keep_checkpoint_max``).
* ``evaluate`` runs the metrics' update ops over the whole input (or ``steps`` batches), then
  reads their values once: streaming metrics average over every example, whatever the batch
  sizes. ``loss`` (``tv.metrics.mean`` of the spec's loss per batch) and ``global_step`` are
  added; the numbers are written as summaries to ``model_dir/eval`` (``eval_<name>``).
* ``predict`` yields the predictions, one example at a time or per batch.

``model_dir`` is an fsspec URL (a local folder, ``file://``, ``memory://`` in one process,
``s3://``); checkpoints are tensorvm's (see :class:`tensorvm.train.Saver`).
"""
from __future__ import annotations

import copy
import functools
import inspect
import logging
import tempfile

from ..framework.graph import Graph
from ..train.hooks import SessionRunHook
from .model_fn import EstimatorSpec
from .run_config import RunConfig
from .training_loop import evaluate_model, predict_model, train_model

_log = logging.getLogger("tensorvm")

__all__ = ["Estimator"]

_VALID_MODEL_FN_ARGS = {"features", "labels", "mode", "params", "self", "config"}


def fn_args(fn) -> tuple[str, ...]:
    """The names of ``fn``'s arguments (a ``functools.partial``'s bound ones left out)."""
    if isinstance(fn, functools.partial):
        bound = set(fn.keywords or {})
        names = fn_args(fn.func)[len(fn.args):]
        return tuple(n for n in names if n not in bound)
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)) and callable(fn):
        fn = fn.__call__
    params = inspect.signature(fn).parameters.values()
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                      p.POSITIONAL_OR_KEYWORD,
                                                      p.KEYWORD_ONLY))


def _verify_model_fn_args(model_fn, params) -> None:
    args = set(fn_args(model_fn))
    if "features" not in args:
        raise ValueError(f"model_fn ({model_fn}) must include features argument.")
    if params is not None and "params" not in args:
        raise ValueError(f"model_fn ({model_fn}) does not include params argument, but "
                         f"params ({params}) is passed to Estimator.")
    if params is None and "params" in args:
        _log.warning("Estimator's model_fn (%s) includes params argument, but params are "
                     "not passed to Estimator.", model_fn)
    bad = sorted(args - _VALID_MODEL_FN_ARGS)
    if bad:
        raise ValueError(f"model_fn ({model_fn}) has following not expected args: {bad}")


def _check_hooks(hooks) -> list:
    hooks = list(hooks or [])
    for h in hooks:
        if not isinstance(h, SessionRunHook):
            raise TypeError(f"Hooks must be a SessionRunHook, given: {h}")
    return hooks


def _config_with_model_dir(config, model_dir) -> RunConfig:
    from ..tf_api.compat import path_to_str
    if config is None:
        config = RunConfig()
    if not isinstance(config, RunConfig):
        raise ValueError(f"config must be an instance of `RunConfig`, but provided {config}.")  # noqa: TRY004 (TF's class)
    model_dir = path_to_str(model_dir)
    if model_dir is not None and config.model_dir is not None and config.model_dir != model_dir:
        raise ValueError("`model_dir` are set both in constructor and `RunConfig`, but with "
                         f"different values. In constructor: '{model_dir}', in `RunConfig`: "
                         f"'{config.model_dir}' ")
    if model_dir:
        return config.replace(model_dir=model_dir)
    if config.model_dir is None:
        model_dir = tempfile.mkdtemp()
        _log.warning("Using temporary folder as model directory: %s", model_dir)
        return config.replace(model_dir=model_dir)
    return config


class Estimator:
    """TF 1.x's ``tf.estimator.Estimator`` (see the module docstring).

    >>> import numpy as np, tensorvm as tv
    >>> def model_fn(features, labels, mode):
    ...     w = tv.get_variable("w", [], initializer=tv.zeros_initializer())
    ...     pred = features * w
    ...     if mode == tv.estimator.ModeKeys.PREDICT:
    ...         return tv.estimator.EstimatorSpec(mode, predictions=pred)
    ...     loss = tv.reduce_mean(tv.square(pred - labels))
    ...     train_op = tv.train.GradientDescentOptimizer(0.05).minimize(
    ...         loss, global_step=tv.train.get_global_step())
    ...     return tv.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    >>> x = np.arange(1, 5, dtype=np.float32)
    >>> est = tv.estimator.Estimator(model_fn, model_dir="memory://tvm-doc-estimator")
    >>> _ = est.train(tv.estimator.inputs.numpy_input_fn(x, 3 * x, 4, None, False), steps=40)
    >>> round(float(est.get_variable_value("w")), 4), int(est.get_variable_value("global_step"))
    (3.0, 40)
    """

    def __init__(self, model_fn, model_dir=None, config=None, params=None,
                 warm_start_from=None):
        from .warm_start import settings_of
        self._config = _config_with_model_dir(config, model_dir)
        self._model_dir = self._config.model_dir
        self._session_config = self._config.session_config
        if model_fn is None:
            raise ValueError("model_fn must be provided to Estimator.")
        _verify_model_fn_args(model_fn, params)
        self._model_fn = model_fn
        self._params = copy.deepcopy(params or {})
        self._warm_start_settings = settings_of(warm_start_from)

    # ---- properties ------------------------------------------------------------------------
    @property
    def model_dir(self) -> str:
        """Where checkpoints and summaries go (an fsspec URL or a local folder)."""
        return self._model_dir

    @property
    def config(self) -> RunConfig:
        """A copy of the :class:`RunConfig`."""
        return copy.deepcopy(self._config)

    @property
    def params(self) -> dict:
        """A copy of the ``params`` passed to ``model_fn``."""
        return copy.deepcopy(self._params)

    @property
    def model_fn(self):
        """The ``model_fn`` bound to this estimator's params: ``(features, labels, mode,
        config)``."""
        def public_model_fn(features, labels, mode, config):
            return self._call_model_fn(features, labels, mode, config)
        return public_model_fn

    def eval_dir(self, name=None) -> str:
        """Where ``evaluate(name=...)`` writes its summaries."""
        return f"{self._model_dir.rstrip('/')}/{'eval' if not name else 'eval_' + name}"

    # ---- checkpoints -----------------------------------------------------------------------
    def latest_checkpoint(self) -> str | None:
        """The path of the latest checkpoint in ``model_dir``, or ``None``."""
        from ..train.saver import latest_checkpoint
        return latest_checkpoint(self._model_dir)

    def _check_checkpoint_available(self) -> None:
        if not self.latest_checkpoint():
            raise ValueError(f"Could not find trained model in model_dir: {self._model_dir}.")

    def get_variable_names(self) -> list[str]:
        """The names of the variables in the latest checkpoint (``ValueError`` without
        one)."""
        from ..train.checkpoint_utils import list_variables
        self._check_checkpoint_available()
        return [name for name, _ in list_variables(self._model_dir)]

    def get_variable_value(self, name):
        """The value (a NumPy array) of variable ``name`` in the latest checkpoint."""
        from ..train.checkpoint_utils import load_variable
        self._check_checkpoint_available()
        return load_variable(self._model_dir, name)

    # ---- calling the user's functions ------------------------------------------------------
    def _call_input_fn(self, input_fn, mode):
        args = fn_args(input_fn)
        kwargs = {}
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self.params
        if "config" in args:
            kwargs["config"] = self.config
        return input_fn(**kwargs)

    def _call_model_fn(self, features, labels, mode, config):
        args = fn_args(self._model_fn)
        kwargs = {}
        if "labels" in args:
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self.params
        if "config" in args:
            kwargs["config"] = config
        _log.info("Calling model_fn.")
        spec = self._model_fn(features=features, **kwargs)
        _log.info("Done calling model_fn.")
        if not isinstance(spec, EstimatorSpec):
            raise ValueError("model_fn should return an EstimatorSpec.")  # noqa: TRY004 (TF's class)
        return spec

    def _new_graph(self, graph: Graph):
        from ..framework.graph import set_random_seed
        from ..train.optimizers import create_global_step
        if self._config.tf_random_seed is not None:
            set_random_seed(self._config.tf_random_seed)
        return create_global_step(graph)

    def _session(self, graph):
        from ..runtime.session import Session
        return Session(self._config.master or None, graph=graph, config=self._session_config,
                       cluster=self._config.cluster_spec, verbose=False)

    def _device_fn(self):
        """TF's training placement: ``RunConfig.device_fn``, else with ``ps`` tasks a
        ``replica_device_setter`` over them, else none."""
        cfg = self._config
        if cfg.device_fn is not None:
            return cfg.device_fn
        if cfg.num_ps_replicas > 0:
            from ..train.device_setter import replica_device_setter
            return replica_device_setter(ps_tasks=cfg.num_ps_replicas,
                                         worker_device="/job:worker",
                                         cluster=cfg.cluster_spec)
        return None

    def _scaffold(self, spec, graph, restore_path):
        """The spec's scaffold with a Saver keeping ``keep_checkpoint_max`` checkpoints and,
        with nothing to restore, the warm start."""
        from ..train.saver import Saver
        from ..ops.state.variables import global_variables
        from .warm_start import warm_start_init_fn
        scaffold = spec.scaffold
        if scaffold.saver is None and global_variables(graph):
            scaffold.saver = Saver(global_variables(graph),
                                   max_to_keep=self._config.keep_checkpoint_max,
                                   keep_checkpoint_every_n_hours=(
                                       self._config.keep_checkpoint_every_n_hours))
        if not restore_path and self._warm_start_settings is not None and \
                scaffold.init_fn is None:
            scaffold.init_fn = warm_start_init_fn(self._warm_start_settings, graph)
        return scaffold

    def _monitored(self, graph, scaffold, hooks, checkpoint_path=None):
        from ..train.monitored_session import MonitoredSession
        sess = self._session(graph)
        try:
            return MonitoredSession(
                sess, True, None if checkpoint_path else self._model_dir, scaffold, hooks,
                own_session=True, max_wait_secs=self._config.session_creation_timeout_secs,
                checkpoint_filename_with_path=checkpoint_path)
        except BaseException:
            sess.close()
            raise

    # ---- train -----------------------------------------------------------------------------
    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """Train on ``input_fn``'s batches for ``steps`` more steps, up to global step
        ``max_steps``, or until the input ends; returns ``self``."""
        from ..train.checkpoint_utils import global_step_of
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        if max_steps is not None and max_steps <= global_step_of(self._model_dir):
            _log.info("Skipping training since max_steps has already saved.")
            return self
        hooks = _check_hooks(hooks)
        if steps is not None or max_steps is not None:
            from ..train.hooks import StopAtStepHook
            hooks.append(StopAtStepHook(steps, max_steps))
        loss = train_model(self, input_fn, hooks, list(saving_listeners or []))
        _log.info("Loss for final step: %s.", loss)
        return self

    # ---- evaluate --------------------------------------------------------------------------
    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        """The metrics of ``model_fn``'s ``eval_metric_ops``, with ``loss`` and
        ``global_step``, over the whole input (or ``steps`` batches), on the latest
        checkpoint (or ``checkpoint_path``); written as summaries to :meth:`eval_dir`."""
        hooks = _check_hooks(hooks)
        if steps is not None:
            if steps <= 0:
                raise ValueError(f"Must specify steps > 0, given: {steps}")
            from .run_hooks import StopAfterNEvalsHook
            hooks.append(StopAfterNEvalsHook(steps))
        if not checkpoint_path:
            checkpoint_path = self.latest_checkpoint()
            if not checkpoint_path:
                _log.info("Could not find trained model in model_dir: %s, running "
                          "initialization to evaluate.", self._model_dir)
        return evaluate_model(self, input_fn, hooks, checkpoint_path, name)

    # ---- predict ---------------------------------------------------------------------------
    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None,
                yield_single_examples=True):
        """Yield the predictions for ``input_fn``'s features until the input ends: one
        example at a time (a dict per example for dict predictions, filtered to
        ``predict_keys``), or whole batches with ``yield_single_examples=False``."""
        hooks = _check_hooks(hooks)
        if not checkpoint_path:
            checkpoint_path = self.latest_checkpoint()
            if not checkpoint_path:
                _log.info("Could not find trained model in model_dir: %s, running "
                          "initialization to predict.", self._model_dir)
        return predict_model(self, input_fn, predict_keys, hooks, checkpoint_path,
                             yield_single_examples)

    # ---- export ----------------------------------------------------------------------------
    def export_saved_model(self, export_dir_base, serving_input_receiver_fn,
                           assets_extra=None, as_text=False, checkpoint_path=None,
                           experimental_mode=None):
        """Write the prediction graph on ``serving_input_receiver_fn``'s inputs with the
        latest checkpoint's variables to ``<export_dir_base>/<timestamp>`` and return that
        path (bytes, as TF). The folder is in tensorvm's formats, read back by
        :func:`tensorvm.estimator.export.load` (see :mod:`tensorvm.estimator.export`)."""
        from .export_model import export_saved_model
        return export_saved_model(self, export_dir_base, serving_input_receiver_fn,
                                  checkpoint_path)

    def export_savedmodel(self, export_dir_base, serving_input_receiver_fn,
                          assets_extra=None, as_text=False, checkpoint_path=None,
                          strip_default_attrs=False):
        """TF 1.x's older name of :meth:`export_saved_model`."""
        return self.export_saved_model(export_dir_base, serving_input_receiver_fn,
                                       assets_extra, as_text, checkpoint_path)

    def __repr__(self):
        return f"<tv.estimator.Estimator model_dir={self._model_dir!r}>"
