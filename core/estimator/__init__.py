"""``tv.estimator``: TF 1.x's ``tf.estimator`` — ``Estimator`` around a ``model_fn``
returning an ``EstimatorSpec``, ``RunConfig``, ``TrainSpec``/``EvalSpec``/
``train_and_evaluate`` and ``inputs.numpy_input_fn``. Modules: :mod:`.model_fn` (the spec and
its checks), :mod:`.run_config`, :mod:`.estimator` (the class and its design),
:mod:`.training_loop` (the three loops), :mod:`.training` (train and evaluate),
:mod:`.inputs`, :mod:`.warm_start`, :mod:`.summary_io`,
:mod:`.run_hooks`, :mod:`.feature_column` (``tv.feature_column``), :mod:`.heads` and
:mod:`.canned` (the premade estimators), :mod:`.export`, :mod:`.experimental` (early
stopping).

>>> import tensorvm as tv
>>> tv.estimator.ModeKeys.PREDICT
'infer'
"""
from . import experimental, export, inputs
from .canned import DNNClassifier, DNNRegressor, LinearClassifier, LinearRegressor
from .estimator import Estimator
from .model_fn import EstimatorSpec, ModeKeys
from .run_config import RunConfig
from .training import EvalSpec, TrainSpec, train_and_evaluate
from .warm_start import WarmStartSettings

__all__ = ["DNNClassifier", "DNNRegressor", "Estimator", "EstimatorSpec", "EvalSpec",
           "LinearClassifier", "LinearRegressor", "ModeKeys", "RunConfig", "TrainSpec",
           "WarmStartSettings", "experimental", "export", "inputs",
           "train_and_evaluate"]
