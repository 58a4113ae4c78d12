"""``tv.estimator.export``: serving inputs and the export of a trained model
(``Estimator.export_saved_model``).

An export is a folder ``<export_dir_base>/<timestamp>/`` holding the prediction graph and its
variables in tensorvm's formats — ``variables/variables`` (a checkpoint) with
``variables/variables.meta`` (its meta graph, see ``tv.train.export_meta_graph``) — and
``signatures.json``: for each signature its input and output tensor names. It is not TF's
SavedModel protocol buffer; load it with :func:`load` (or ``tv.train.import_meta_graph`` and
``Saver.restore``).

>>> import numpy as np, tensorvm as tv
>>> fn = tv.estimator.export.build_raw_serving_input_receiver_fn(
...     {"x": tv.placeholder(tv.float32, [None, 3])})
>>> with tv.Graph().as_default():
...     r = fn()
...     sorted(r.receiver_tensors), r.features["x"].shape.as_list()
(['x'], [None, 3])
"""
from __future__ import annotations

import collections
import json

from ..framework.graph import Tensor

__all__ = ["ClassificationOutput", "ExportOutput", "PredictOutput", "RegressionOutput",
           "ServingInputReceiver", "TensorServingInputReceiver",
           "build_parsing_serving_input_receiver_fn", "build_raw_serving_input_receiver_fn",
           "load"]

DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"
SIGNATURES_FILE = "signatures.json"


def _tensor_dict(value, default_key, what):
    if isinstance(value, Tensor):
        value = {default_key: value}
    if not isinstance(value, dict):
        raise ValueError(  # noqa: TRY004 (TF's class)
            f"{what} must be a Tensor or a dict of Tensors, given: {value}")
    for k, v in value.items():
        if not isinstance(k, str):
            raise ValueError(f"{what} keys must be strings: {k}.")  # noqa: TRY004
        if not isinstance(v, Tensor):
            raise ValueError(f"{what} {k} must be a Tensor: {v}.")  # noqa: TRY004
    return value


class ServingInputReceiver(collections.namedtuple(
        "ServingInputReceiver", ["features", "receiver_tensors",
                                 "receiver_tensors_alternatives"])):
    """What a serving input function returns: the ``features`` given to ``model_fn`` and the
    ``receiver_tensors`` (placeholders) a request feeds."""

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        if features is None:
            raise ValueError("features must be defined.")
        features = _tensor_dict(features, "feature", "feature")
        receiver_tensors = _tensor_dict(receiver_tensors, "input", "receiver_tensor")
        return super().__new__(cls, features, receiver_tensors, receiver_tensors_alternatives)


class TensorServingInputReceiver(collections.namedtuple(
        "TensorServingInputReceiver", ["features", "receiver_tensors",
                                       "receiver_tensors_alternatives"])):
    """A receiver whose ``features`` is one tensor (passed to ``model_fn`` as is)."""

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        if not isinstance(features, Tensor):
            raise ValueError(f"features must be a Tensor, given: {features}")  # noqa: TRY004
        receiver_tensors = _tensor_dict(receiver_tensors, "input", "receiver_tensor")
        return super().__new__(cls, features, receiver_tensors, receiver_tensors_alternatives)


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
    """A serving input function feeding ``features`` (a dict of tensors or placeholders: only
    their dtypes and shapes are used) directly, through new placeholders."""
    def serving_input_receiver_fn():
        from ..ops import placeholder
        receivers = {}
        for name, t in features.items():
            shape = t.shape.dims
            shape = None if shape is None else [default_batch_size] + list(shape[1:])
            receivers[name] = placeholder(t.dtype, shape, name=name)
        return ServingInputReceiver(dict(receivers), receivers)
    return serving_input_receiver_fn


def build_parsing_serving_input_receiver_fn(feature_spec, default_batch_size=None):
    """A serving input function taking serialized ``tf.Example`` protos (``examples``) and
    parsing them with ``feature_spec`` (``tv.parse_example``)."""
    def serving_input_receiver_fn():
        from ..framework import dtypes as _dt
        from ..ops import parse_example, placeholder
        serialized = placeholder(_dt.string, [default_batch_size], name="input_example_tensor")
        features = parse_example(serialized, feature_spec)
        return ServingInputReceiver(features, {"examples": serialized})
    return serving_input_receiver_fn


class ExportOutput:
    """Base of the named outputs of a signature (``outputs``: name -> tensor)."""

    method = "predict"

    def __init__(self, outputs):
        self.outputs = _tensor_dict(outputs, "output", "output")


class PredictOutput(ExportOutput):
    """A signature returning ``outputs`` (a tensor or a dict of tensors)."""


class RegressionOutput(ExportOutput):
    """A regression signature: ``value``."""

    method = "regress"

    def __init__(self, value):
        super().__init__({"outputs": value})


class ClassificationOutput(ExportOutput):
    """A classification signature: ``scores`` and/or ``classes``."""

    method = "classify"

    def __init__(self, scores=None, classes=None):
        outs = {k: v for k, v in (("scores", scores), ("classes", classes)) if v is not None}
        if not outs:
            raise ValueError("Cannot create a ClassificationOutput with empty arguments. At "
                             "least one of `scores` and `classes` must be defined.")
        super().__init__(outs)


def load(sess, export_dir, signature_key=DEFAULT_SERVING_SIGNATURE_DEF_KEY):
    """Load an export into ``sess``'s graph and restore its variables; returns the signature
    ``{"inputs": {name: tensor}, "outputs": {name: tensor}}``."""
    from ..storage.fsio import to_fs
    from ..train.saver import import_meta_graph
    export_dir = export_dir.decode() if isinstance(export_dir, bytes) else str(export_dir)
    fs, path = to_fs(export_dir)
    signatures = json.loads(fs.cat_file(f"{path}/{SIGNATURES_FILE}"))
    if signature_key not in signatures:
        raise ValueError(f"signature {signature_key!r} not in the export (it has "
                         f"{sorted(signatures)})")
    with sess.graph.as_default():
        saver = import_meta_graph(f"{export_dir}/variables/variables.meta")
        if saver is not None:
            saver.restore(sess, f"{export_dir}/variables/variables")
    g = sess.graph
    sig = signatures[signature_key]
    return {part: {k: g.get_tensor_by_name(v) for k, v in sig[part].items()}
            for part in ("inputs", "outputs")}
