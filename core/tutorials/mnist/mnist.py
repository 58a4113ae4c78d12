"""``tensorflow.examples.tutorials.mnist.mnist``: the fully-connected tutorials' model.

``inference(images, hidden1_units, hidden2_units)`` builds two ReLU layers and a linear layer
(variables ``hidden1/weights``... initialised as TF's tutorial does), ``loss`` the mean sparse
softmax cross-entropy, ``training`` a gradient-descent step that counts ``global_step`` (with a
``loss`` scalar summary) and ``evaluation`` the number of logits whose top class is the label.
The shim prefers a program's own ``mnist.py`` beside it; this module is for programs that
import TF's copy.

>>> import tensorvm as tv
>>> with tv.Graph().as_default():
...     logits = inference(tv.placeholder(tv.float32, [None, IMAGE_PIXELS]), 8, 4)
...     [v.op.name for v in tv.trainable_variables()][:2], logits.shape.as_list()
(['hidden1/weights', 'hidden1/biases'], [None, 10])
"""
from __future__ import annotations

import math

__all__ = [
    "IMAGE_PIXELS",
    "IMAGE_SIZE",
    "NUM_CLASSES",
    "evaluation",
    "inference",
    "loss",
    "training",
]

NUM_CLASSES = 10
IMAGE_SIZE = 28
IMAGE_PIXELS = IMAGE_SIZE * IMAGE_SIZE


def _dense(x, n_in: int, n_out: int, scope: str):
    import tensorvm as tv
    with tv.name_scope(scope):
        weights = tv.Variable(tv.truncated_normal([n_in, n_out],
                                                  stddev=1.0 / math.sqrt(float(n_in))),
                              name="weights")
        biases = tv.Variable(tv.zeros([n_out]), name="biases")
        return tv.matmul(x, weights) + biases


def inference(images, hidden1_units: int, hidden2_units: int):
    """Logits ``[batch, NUM_CLASSES]`` of the two-hidden-layer network."""
    import tensorvm as tv
    hidden1 = tv.nn.relu(_dense(images, IMAGE_PIXELS, hidden1_units, "hidden1"))
    hidden2 = tv.nn.relu(_dense(hidden1, hidden1_units, hidden2_units, "hidden2"))
    return _dense(hidden2, hidden2_units, NUM_CLASSES, "softmax_linear")


def loss(logits, labels):
    """Mean sparse softmax cross-entropy of ``logits`` against class ``labels``."""
    import tensorvm as tv
    return tv.losses.sparse_softmax_cross_entropy(labels=tv.cast(labels, tv.int64),
                                                  logits=logits)


def training(loss, learning_rate):
    """A gradient-descent step on ``loss`` that also adds one to ``global_step``."""
    import tensorvm as tv
    tv.summary.scalar("loss", loss)
    global_step = tv.Variable(0, name="global_step", trainable=False)
    return tv.train.GradientDescentOptimizer(learning_rate).minimize(loss,
                                                                     global_step=global_step)


def evaluation(logits, labels):
    """How many rows of ``logits`` have their largest value at the row's label (int32)."""
    import tensorvm as tv
    correct = tv.nn.in_top_k(logits, labels, 1)
    return tv.reduce_sum(tv.cast(correct, tv.int32))
