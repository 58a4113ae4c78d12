"""``tv.GraphKeys`` and the collection functions of TF 1.x (``tv.add_to_collection``,
``tv.get_collection``, ``tv.local_variables`` …); the initializers that read them are ops, in
``ops/state/variables.py``.

A variable made with ``collections=[tv.GraphKeys.LOCAL_VARIABLES]`` is a local variable: not in
``global_variables()`` (so a Saver skips it), initialised by ``local_variables_initializer()``.

>>> import tensorvm as tv
>>> g = tv.Graph()
>>> with g.as_default():
...     v = tv.Variable(0, collections=[tv.GraphKeys.LOCAL_VARIABLES], trainable=False)
...     tv.global_variables(), len(tv.local_variables())
([], 1)
"""
from __future__ import annotations

from .graph import get_default_graph

__all__ = ["GraphKeys", "add_to_collection", "add_to_collections", "get_collection",
           "get_collection_ref", "local_variables", "model_variables", "moving_average_variables"]


class GraphKeys:
    """Standard collection names (the same strings as TF 1.x)."""
    GLOBAL_VARIABLES = "variables"
    VARIABLES = GLOBAL_VARIABLES
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    METRIC_VARIABLES = "metric_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    ASSET_FILEPATHS = "asset_filepaths"
    REGULARIZATION_LOSSES = "regularization_losses"
    LOSSES = "losses"
    UPDATE_OPS = "update_ops"
    GLOBAL_STEP = "global_step"
    SAVERS = "savers"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    SUMMARY_OP = "summary_op"
    TRAIN_OP = "train_op"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"
    COND_CONTEXT = "cond_context"
    WHILE_CONTEXT = "while_context"


def add_to_collection(name, value) -> None:
    """Append ``value`` to collection ``name`` of the default graph."""
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value) -> None:
    """Append ``value`` to each collection of ``names`` (one name or a list) of the default
    graph."""
    for n in ([names] if isinstance(names, str) else names):
        add_to_collection(n, value)


def get_collection(key, scope: str | None = None) -> list:
    """The items of collection ``key`` of the default graph (a copy); with ``scope``, only
    those whose ``name`` starts with it (TF's ``re.match``)."""
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key) -> list:
    """The list itself: appending to it adds to the collection."""
    return get_default_graph().get_collection_ref(key)


def local_variables(scope: str | None = None) -> list:
    """The variables of ``GraphKeys.LOCAL_VARIABLES`` (per-worker state such as metric
    accumulators, left out of checkpoints); with ``scope``, those whose name starts with it."""
    return get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope: str | None = None) -> list:
    """The variables of ``GraphKeys.MODEL_VARIABLES`` (those a program adds there; tensorvm's
    layers add none); with ``scope``, filtered by name prefix."""
    return get_collection(GraphKeys.MODEL_VARIABLES, scope)


def moving_average_variables(scope: str | None = None) -> list:
    """The variables of ``GraphKeys.MOVING_AVERAGE_VARIABLES`` (those a program adds there);
    with ``scope``, filtered by name prefix."""
    return get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)
