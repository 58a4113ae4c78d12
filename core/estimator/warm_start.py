"""``tv.estimator.WarmStartSettings``: start a new model's variables from another model's
checkpoint (TF 1.x's ``warm_start_from``), when ``model_dir`` has no checkpoint yet."""
from __future__ import annotations

import collections
import logging

_log = logging.getLogger("tensorvm")

__all__ = ["WarmStartSettings", "settings_of", "warm_start_init_fn"]


class WarmStartSettings(collections.namedtuple(
        "WarmStartSettings", ["ckpt_to_initialize_from", "vars_to_warm_start",
                              "var_name_to_vocab_info", "var_name_to_prev_var_name"])):
    """Which checkpoint (a folder or a checkpoint path) and which variables: a regular
    expression matched against the trainable variables' names (default ``".*"``), or a list
    of expressions matched against every global variable. ``var_name_to_prev_var_name``
    maps a variable to its name in the checkpoint. Vocabulary remapping is not supported
    (``var_name_to_vocab_info`` must be empty)."""

    def __new__(cls, ckpt_to_initialize_from, vars_to_warm_start=".*",
                var_name_to_vocab_info=None, var_name_to_prev_var_name=None):
        if not ckpt_to_initialize_from:
            raise ValueError("`ckpt_to_initialize_from` MUST be set in WarmStartSettings")
        if var_name_to_vocab_info:
            raise ValueError("WarmStartSettings: var_name_to_vocab_info (vocabulary "
                             "remapping) is not supported by tensorvm")
        return super().__new__(cls, str(ckpt_to_initialize_from), vars_to_warm_start,
                               var_name_to_vocab_info or {}, var_name_to_prev_var_name or {})


def settings_of(warm_start_from) -> WarmStartSettings | None:
    """``warm_start_from`` as settings: ``None``, a path, or ``WarmStartSettings``."""
    if warm_start_from is None:
        return None
    from ..tf_api.compat import path_to_str
    warm_start_from = path_to_str(warm_start_from)
    if isinstance(warm_start_from, str):
        return WarmStartSettings(warm_start_from)
    if isinstance(warm_start_from, WarmStartSettings):
        return warm_start_from
    raise ValueError("warm_start_from must be a string or a WarmStartSettings, instead got "
                     f"{type(warm_start_from)}")


def warm_start_init_fn(settings: WarmStartSettings, graph):
    """A ``Scaffold.init_fn`` that restores the chosen variables from the settings'
    checkpoint (built now, in ``graph``), or ``None`` when no variable is chosen."""
    from ..train.checkpoint_utils import latest_checkpoint_path, warm_start_variables
    from ..train.saver import Saver
    chosen = warm_start_variables(graph, settings.vars_to_warm_start)
    if not chosen:
        return None
    path = latest_checkpoint_path(settings.ckpt_to_initialize_from)
    names = {v.op.name: v for v in chosen}
    var_list = {settings.var_name_to_prev_var_name.get(n, n): v for n, v in names.items()}
    with graph.as_default():
        saver = Saver(var_list, name="warm_start")

    def init_fn(scaffold, session):
        _log.info("Warm-starting %d variables from %s", len(var_list), path)
        saver.restore(session, path)

    return init_fn
