"""``tv.estimator.RunConfig``: how an :class:`~tensorvm.estimator.Estimator` runs — where
checkpoints go and how often, the graph's random seed, logging cadence. The values and
their checks are TF 1.x's (``RunConfig.replace`` makes a changed copy).

>>> import tensorvm as tv
>>> c = tv.estimator.RunConfig(save_checkpoints_steps=10)
>>> c.save_checkpoints_steps, c.save_checkpoints_secs, c.keep_checkpoint_max
(10, None, 5)
"""
from __future__ import annotations

import copy

__all__ = ["RunConfig"]

_USE_DEFAULT = object()
_SAVE_CKPT_ERR = "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set."
_REPLACEABLE = ("model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
                "save_checkpoints_secs", "session_config", "keep_checkpoint_max",
                "keep_checkpoint_every_n_hours", "log_step_count_steps", "train_distribute",
                "device_fn", "protocol", "eval_distribute", "experimental_distribute",
                "experimental_max_worker_delay_secs", "session_creation_timeout_secs")

_CHECKS = (
    ("model_dir", lambda d: d, "model_dir should be non-empty"),
    ("save_summary_steps", lambda s: s >= 0, "save_summary_steps should be >= 0"),
    ("save_checkpoints_steps", lambda s: s >= 0, "save_checkpoints_steps should be >= 0"),
    ("save_checkpoints_secs", lambda s: s >= 0, "save_checkpoints_secs should be >= 0"),
    ("keep_checkpoint_max", lambda k: k >= 0, "keep_checkpoint_max should be >= 0"),
    ("keep_checkpoint_every_n_hours", lambda h: h > 0,
     "keep_checkpoint_every_n_hours should be > 0"),
    ("log_step_count_steps", lambda n: n > 0, "log_step_count_steps should be > 0"),
    ("tf_random_seed", lambda s: isinstance(s, int) and not isinstance(s, bool),
     "tf_random_seed must be integer."),
)


class RunConfig:
    """TF 1.x's ``tf.estimator.RunConfig``. By default a checkpoint is saved every 600 s
    (``save_checkpoints_steps`` or ``save_checkpoints_secs``, not both), 5 are kept, the
    step rate and loss are logged every 100 steps. ``session_config`` is passed to the
    :class:`tensorvm.Session` each call makes. Distribution strategies are accepted and not
    used (an Estimator trains in one session; a tensorvm cluster is reached through device
    scopes in the ``model_fn``)."""

    def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100,
                 save_checkpoints_steps=_USE_DEFAULT, save_checkpoints_secs=_USE_DEFAULT,
                 session_config=None, keep_checkpoint_max=5,
                 keep_checkpoint_every_n_hours=10000, log_step_count_steps=100,
                 train_distribute=None, device_fn=None, protocol=None, eval_distribute=None,
                 experimental_distribute=None, experimental_max_worker_delay_secs=None,
                 session_creation_timeout_secs=7200):
        if save_checkpoints_steps is _USE_DEFAULT and save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_steps, save_checkpoints_secs = None, 600
        elif save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_secs = None
        elif save_checkpoints_steps is _USE_DEFAULT:
            save_checkpoints_steps = None
        elif save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError(_SAVE_CKPT_ERR)
        if model_dir == "":
            raise ValueError("model_dir should be non-empty.")
        from ..compat import path_to_str
        self._set(model_dir=path_to_str(model_dir), tf_random_seed=tf_random_seed,
                  save_summary_steps=save_summary_steps,
                  save_checkpoints_steps=save_checkpoints_steps,
                  save_checkpoints_secs=save_checkpoints_secs, session_config=session_config,
                  keep_checkpoint_max=keep_checkpoint_max,
                  keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
                  log_step_count_steps=log_step_count_steps,
                  train_distribute=train_distribute, device_fn=device_fn, protocol=protocol,
                  eval_distribute=eval_distribute,
                  experimental_distribute=experimental_distribute,
                  experimental_max_worker_delay_secs=experimental_max_worker_delay_secs,
                  session_creation_timeout_secs=session_creation_timeout_secs)

    def _set(self, **kwargs) -> RunConfig:
        for key, value in kwargs.items():
            if key not in _REPLACEABLE:
                raise ValueError(f"Replacing {key} is not supported. Allowed properties are "
                                 f"{list(_REPLACEABLE)}.")
            setattr(self, "_" + key, value)
        if "save_checkpoints_steps" in kwargs and "save_checkpoints_secs" in kwargs:
            if self._save_checkpoints_steps is not None and \
                    self._save_checkpoints_secs is not None:
                raise ValueError(_SAVE_CKPT_ERR)
        elif kwargs.get("save_checkpoints_steps") is not None:
            self._save_checkpoints_secs = None
        elif kwargs.get("save_checkpoints_secs") is not None:
            self._save_checkpoints_steps = None
        for name, ok, message in _CHECKS:
            value = getattr(self, "_" + name)
            if value is not None and not ok(value):
                raise ValueError(message)
        return self

    def replace(self, **kwargs) -> RunConfig:
        """A copy with the given properties changed (``ValueError`` for an unknown one)."""
        return copy.deepcopy(self)._set(**kwargs)

    # TF's cluster properties: an Estimator here is always its own chief.
    cluster_spec = None
    master = ""
    evaluation_master = ""
    task_type = None
    task_id = 0
    is_chief = True
    num_ps_replicas = 0
    num_worker_replicas = 1
    global_id_in_cluster = 0
    service = None

    def __repr__(self):
        return f"<tv.estimator.RunConfig {self.__dict__}>"


def _prop(name):
    return property(lambda self: getattr(self, "_" + name),
                    doc=f"``{name}`` (see the class docstring).")


for _name in _REPLACEABLE:
    setattr(RunConfig, _name, _prop(_name))
del _name
