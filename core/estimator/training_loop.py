"""The three loops of an :class:`~tensorvm.estimator.Estimator` (train, evaluate, predict),
each in a fresh graph and session; see :mod:`tensorvm.estimator.estimator` for the design."""
from __future__ import annotations

import logging

from ..framework.graph import Graph
from .model_fn import LOSS_METRIC_KEY, ModeKeys

_log = logging.getLogger("tensorvm")

__all__ = ["evaluate_model", "predict_model", "train_model"]


def _parse_input_fn_result(result):
    """``(features, labels, hooks)`` from what an ``input_fn`` returned."""
    from ..ops.data.dataset_ops import Dataset
    from .run_hooks import DatasetInitializerHook
    hooks = []
    if isinstance(result, Dataset):
        iterator = result.make_initializable_iterator()
        hooks.append(DatasetInitializerHook(iterator))
        result = iterator.get_next()
    if isinstance(result, (list, tuple)):
        if len(result) != 2:
            raise ValueError("input_fn should return (features, labels) as a len 2 tuple.")
        return result[0], result[1], hooks
    return result, None, hooks


def _inputs(est, input_fn, mode):
    return _parse_input_fn_result(est._call_input_fn(input_fn, mode))


def _summary_op(loss):
    from ..framework.graph_keys import GraphKeys, get_collection
    from ..tf_api.summary import merge_all, scalar
    if not any(getattr(s.op, "name", None) == "loss"
               for s in get_collection(GraphKeys.SUMMARIES)):
        scalar("loss", loss)
    return merge_all()


def _train_hooks(est, spec, gs, listeners):
    """The training hooks of TF's ``_train_with_estimator_spec``; returns (hooks, writer)."""
    from ..train import hooks as h
    cfg = est._config
    hooks = [h.NanTensorHook(spec.loss)]
    if cfg.log_step_count_steps is not None:
        hooks.append(h.LoggingTensorHook({"loss": spec.loss, "step": gs},
                                         every_n_iter=cfg.log_step_count_steps))
        hooks.append(h.StepCounterHook(every_n_steps=cfg.log_step_count_steps))
    hooks += list(spec.training_hooks) + list(spec.training_chief_hooks)
    writer = None
    if cfg.save_summary_steps:
        op = _summary_op(spec.loss)
        if op is not None:
            from .summary_io import summary_writer
            writer = summary_writer(est._model_dir)
            hooks.append(h.SummarySaverHook(save_steps=cfg.save_summary_steps,
                                            summary_writer=writer, summary_op=op))
    savers = [x for x in hooks if isinstance(x, h.CheckpointSaverHook)]
    if not savers and (cfg.save_checkpoints_secs or cfg.save_checkpoints_steps):
        savers = [h.CheckpointSaverHook(est._model_dir, save_secs=cfg.save_checkpoints_secs,
                                        save_steps=cfg.save_checkpoints_steps,
                                        scaffold=spec.scaffold)]
        hooks += savers
    if listeners:
        if not savers:
            raise ValueError("There should be a CheckpointSaverHook to use saving_listeners. "
                             "Please set one of the RunConfig.save_checkpoints_steps or "
                             "RunConfig.save_checkpoints_secs.")
        savers[0]._listeners += [x for x in listeners if x not in savers[0]._listeners]
    return hooks, writer


def train_model(est, input_fn, hooks, listeners):
    """Build the training graph and run ``[train_op, loss]`` until a hook stops or the
    input ends; returns the last loss (``None`` when no step ran)."""
    from ..framework.graph_keys import GraphKeys
    from ..train.hooks import CheckpointSaverListener
    for x in listeners:
        if not isinstance(x, CheckpointSaverListener):
            raise TypeError("saving_listeners must be a list of CheckpointSaverListener, "
                            f"given: {x}")
    with Graph().as_default() as g, g.device(est._device_fn()):
        gs = est._new_graph(g)
        features, labels, input_hooks = _inputs(est, input_fn, ModeKeys.TRAIN)
        spec = est._call_model_fn(features, labels, ModeKeys.TRAIN, est.config)
        g.add_to_collection(GraphKeys.LOSSES, spec.loss)
        extra, writer = _train_hooks(est, spec, gs, listeners)
        scaffold = est._scaffold(spec, g, est.latest_checkpoint())
        loss, steps = None, 0
        try:
            with est._monitored(g, scaffold, input_hooks + hooks + extra) as mon:
                while not mon.should_stop():
                    _, loss = mon.run([spec.train_op, spec.loss])
                    steps += 1
        finally:
            if writer is not None:
                writer.close()
    if not steps:
        _log.warning("Training with estimator made no steps. Perhaps input is empty or "
                     "misspecified.")
    return loss


def _eval_graph(est, input_fn, hooks):
    """The metrics' update op and values (with ``loss`` and ``global_step``) and the
    hooks of one evaluation, built in the default graph."""
    from ..framework.graph import get_default_graph
    from ..tf_api.metrics import mean
    from ..ops.array.array_ops import group
    gs = est._new_graph(get_default_graph())
    features, labels, input_hooks = _inputs(est, input_fn, ModeKeys.EVAL)
    spec = est._call_model_fn(features, labels, ModeKeys.EVAL, est.config)
    metrics = dict(spec.eval_metric_ops)
    if LOSS_METRIC_KEY in metrics:
        raise ValueError(f'Metric with name "{LOSS_METRIC_KEY}" is not allowed, because '
                         "Estimator already defines a default metric with the same name.")
    metrics[LOSS_METRIC_KEY] = mean(spec.loss)
    update_op = group(*[metrics[k][1] for k in sorted(metrics)])
    values = {k: v[0] for k, v in metrics.items()}
    if "global_step" in values:
        raise ValueError("Metric with name `global_step` is not allowed, because Estimator "
                         "already defines a default metric with the same name.")
    values["global_step"] = gs
    return spec, update_op, values, input_hooks + hooks + list(spec.evaluation_hooks)


def evaluate_model(est, input_fn, hooks, checkpoint_path, name):
    """Run the update ops over the input, then read the metrics; write them to the
    evaluation folder and return them."""
    from ..train.hooks import FinalOpsHook
    from .summary_io import write_dict_to_summary
    with Graph().as_default() as g:
        spec, update_op, values, all_hooks = _eval_graph(est, input_fn, hooks)
        final = FinalOpsHook(values)
        scaffold = est._scaffold(spec, g, checkpoint_path)
        with est._monitored(g, scaffold, all_hooks + [final], checkpoint_path) as mon:
            while not mon.should_stop():
                mon.run(update_op)
    results = final.final_ops_values
    write_dict_to_summary(est.eval_dir(name), results, int(results["global_step"]))
    return results


def predict_model(est, input_fn, predict_keys, hooks, checkpoint_path, single):
    """A generator of predictions (see ``Estimator.predict``)."""
    with Graph().as_default() as g:
        est._new_graph(g)
        features, _, input_hooks = _inputs(est, input_fn, ModeKeys.PREDICT)
        spec = est._call_model_fn(features, None, ModeKeys.PREDICT, est.config)
        predictions = extract_keys(spec.predictions, predict_keys)
        scaffold = est._scaffold(spec, g, checkpoint_path)
        with est._monitored(g, scaffold, input_hooks + hooks + list(spec.prediction_hooks),
                            checkpoint_path) as mon:
            while not mon.should_stop():
                values = mon.run(predictions)
                if not single:
                    yield values
                elif not isinstance(predictions, dict):
                    yield from values
                else:
                    for i in range(extract_batch_length(values)):
                        yield {k: v[i] for k, v in values.items()}


def extract_keys(predictions, predict_keys):
    """``predictions`` filtered to ``predict_keys`` (TF's errors for a bad request)."""
    if not predict_keys:
        return predictions
    if not isinstance(predictions, dict):
        raise ValueError("predict_keys argument is not valid in case of non-dict predictions.")  # noqa: TRY004 (TF's class)
    existing = list(predictions)
    out = {k: v for k, v in predictions.items() if k in predict_keys}
    if not out:
        raise ValueError(f"Expected to run at least one output from {existing}, provided "
                         f"{predict_keys}.")
    return out


def extract_batch_length(values: dict) -> int:
    """The common first dimension of the evaluated predictions."""
    length = None
    for key, value in values.items():
        length = length or value.shape[0]
        if value.shape[0] != length:
            raise ValueError(f"Batch length of predictions should be same. {key} has "
                             "different batch length than others.")
    return length

