"""``tv.random``: TF >= 1.13's spellings of the random ops (``tf.random.normal``,
``tf.random.truncated_normal``...), the same ops as ``tv.random_normal`` and the rest.

>>> import tensorvm as tv
>>> tv.random.truncated_normal is tv.truncated_normal, tv.random.set_random_seed is tv.set_random_seed
(True, True)
"""
from __future__ import annotations

from ..framework.graph import set_random_seed
from ..ops.math.random_ops import (
           multinomial,
           random_normal,
           random_shuffle,
           random_uniform,
           truncated_normal,
)

__all__ = [
           "multinomial",
           "normal",
           "set_random_seed",
           "set_seed",
           "shuffle",
           "truncated_normal",
           "uniform",
]

normal = random_normal
uniform = random_uniform
shuffle = random_shuffle
set_seed = set_random_seed
