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
    used. tensorvm's keyword arguments ``master`` (a session target: ``"local"``, a Dask
    scheduler address) and ``cluster_spec`` (a ``tv.train.ClusterSpec`` or dict) run the
    Estimator's sessions on a cluster; training then places the model with ``device_fn``,
    by default TF's ``replica_device_setter`` over the ``ps`` tasks. ``model_dir`` must then
    be storage every worker reaches (a shared ``file://`` folder, ``s3://``), not
    ``memory://``."""

    def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100,
                 save_checkpoints_steps=_USE_DEFAULT, save_checkpoints_secs=_USE_DEFAULT,
                 session_config=None, keep_checkpoint_max=5,
                 keep_checkpoint_every_n_hours=10000, log_step_count_steps=100,
                 train_distribute=None, device_fn=None, protocol=None, eval_distribute=None,
                 experimental_distribute=None, experimental_max_worker_delay_secs=None,
                 session_creation_timeout_secs=7200, *, master=None, cluster_spec=None):
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
        from ..tf_api.compat import path_to_str
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
        from ..runtime.cluster.spec import ClusterSpec
        self._master = master or ""
        self._cluster_spec = None if cluster_spec is None else ClusterSpec(cluster_spec)

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

    # TF's cluster properties. An Estimator is always its own chief: with ``cluster_spec``
    # its sessions place the model on that cluster's jobs (the variables on the ``ps`` tasks
    # by default) and the chief runs the loop.
    task_id = 0
    is_chief = True
    global_id_in_cluster = 0
    service = None

    @property
    def master(self) -> str:
        """The session target (tensorvm's addition as a constructor argument, as TF 1.x's
        ``contrib.learn.RunConfig``): ``""`` in-process, ``"local"`` or a Dask scheduler
        address such as ``"tcp://host:8786"``."""
        return self._master

    @property
    def evaluation_master(self) -> str:
        """The session target of evaluations (the same as ``master``)."""
        return self._master

    @property
    def cluster_spec(self):
        """The ``tv.train.ClusterSpec`` the sessions map their jobs with, or ``None``."""
        return self._cluster_spec

    @property
    def task_type(self):
        """``"worker"`` on a cluster, else ``None``."""
        return None if self._cluster_spec is None else "worker"

    @property
    def num_ps_replicas(self) -> int:
        """The number of ``ps`` tasks of ``cluster_spec``."""
        spec = self._cluster_spec
        return spec.num_tasks("ps") if spec is not None and "ps" in spec.jobs else 0

    @property
    def num_worker_replicas(self) -> int:
        """The number of ``worker`` tasks of ``cluster_spec`` (1 without one)."""
        spec = self._cluster_spec
        return spec.num_tasks("worker") if spec is not None and "worker" in spec.jobs else 1

    def __repr__(self):
        return f"<tv.estimator.RunConfig {self.__dict__}>"


def _prop(name):
    return property(lambda self: getattr(self, "_" + name),
                    doc=f"``{name}`` (see the class docstring).")


for _name in _REPLACEABLE:
    setattr(RunConfig, _name, _prop(_name))
del _name
