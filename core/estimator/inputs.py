"""``tv.estimator.inputs``: input functions over in-memory data (TF 1.x's
``tf.estimator.inputs.numpy_input_fn``), built on ``tv.data``.

>>> import numpy as np, tensorvm as tv
>>> fn = tv.estimator.inputs.numpy_input_fn({"a": np.arange(5.0)}, np.arange(5),
...                                         batch_size=2, shuffle=False)
>>> with tv.Graph().as_default():
...     features, labels = fn()
...     with tv.train.MonitoredSession(tv.Session(), own_session=True) as s:
...         print([s.run(labels).tolist() for _ in range(3)])
[[0, 1], [2, 3], [4]]

Outside an Estimator the input starts with the session's local initialisation
(``tv.train.Scaffold.default_local_init_op()``), which a ``MonitoredSession`` runs, as TF's
queue-fed ``numpy_input_fn`` needs its queue runners started.
"""
from __future__ import annotations

import collections

import numpy as np

__all__ = ["numpy_input_fn"]

_DIRECT = "__direct_np_input__"
_TARGET = "__target_key__"


def _features_dict(x) -> collections.OrderedDict:
    if isinstance(x, dict):
        if not x:
            raise ValueError("x cannot be an empty dict")
        return collections.OrderedDict(sorted((k, np.asarray(v)) for k, v in x.items()))
    if isinstance(x, np.ndarray):
        return collections.OrderedDict([(_DIRECT, x)])
    raise TypeError(f"x must be a dict or array; got {type(x).__name__}")


def _target_key(features) -> str:
    key = _TARGET
    while key in features:
        key += "_n"
    return key


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None,
                   queue_capacity=1000, num_threads=1):
    """An ``input_fn`` returning ``(features, labels)`` batches of NumPy data (TF 1.x's
    semantics): ``x`` an array (features is then one tensor) or a dict of arrays, ``y`` an
    array, a dict, or ``None`` (then only features are returned). Batches of ``batch_size``
    rows run across epoch boundaries; after ``num_epochs`` epochs (``None``: forever) the
    last batch may be smaller and the next read is ``OutOfRangeError``. ``shuffle`` must be
    given as a bool; shuffling draws from a buffer of ``queue_capacity`` rows, reshuffled
    each epoch (the graph's seed makes it repeatable). ``num_threads`` is accepted (rows are
    read in one pipeline)."""
    if not isinstance(shuffle, bool):
        raise ValueError("shuffle must be provided and explicitly set as boolean (it is "  # noqa: TRY004 (TF's class)
                         f"recommended to set it as True for training); got {shuffle}")

    def input_fn():
        """The NumPy input function."""
        from ..tf_api.data import Dataset
        from ..framework.graph import get_default_graph
        from ..train.monitored_session import LOCAL_RESOURCES
        data = _features_dict(x)
        feature_keys = list(data)
        if y is None:
            target_keys = None
        elif isinstance(y, dict):
            if not y:
                raise ValueError("y cannot be empty dict, use None instead.")
            ys = collections.OrderedDict(sorted((k, np.asarray(v)) for k, v in y.items()))
            target_keys = list(ys)
            dup = set(feature_keys) & set(target_keys)
            if dup:
                raise ValueError(f"{len(dup)} duplicate keys are found in both x and y: {dup}")
            data.update(ys)
        else:
            target_keys = _target_key(data)
            data[target_keys] = np.asarray(y)
        if len({v.shape[0] for v in data.values()}) != 1:
            shape_x = {k: data[k].shape for k in feature_keys}
            shape_y = None if target_keys is None else (
                np.asarray(y).shape if isinstance(target_keys, str)
                else {k: data[k].shape for k in target_keys})
            raise ValueError("Length of tensors in x and y is mismatched. All elements in x "
                             "and y must have the same length.\n"
                             f"Shapes in x: {shape_x}\nShapes in y: {shape_y}\n")
        n = next(iter(data.values())).shape[0]
        ds = Dataset.from_tensor_slices(dict(data))
        if shuffle:
            ds = ds.shuffle(max(1, min(int(queue_capacity), n)))
        ds = ds.repeat(num_epochs).batch(int(batch_size))
        # An iterator each new session restarts (a local resource, as TF's queue-fed input):
        # a one-shot iterator on a cluster would outlive the session that read it.
        iterator = ds.make_initializable_iterator()
        get_default_graph().add_to_collection(LOCAL_RESOURCES, iterator)
        batch = iterator.get_next()
        features = batch[_DIRECT] if isinstance(x, np.ndarray) else \
            {k: batch[k] for k in feature_keys}
        if target_keys is None:
            return features
        if isinstance(target_keys, str):
            return features, batch[target_keys]
        return features, {k: batch[k] for k in target_keys}

    return input_fn
