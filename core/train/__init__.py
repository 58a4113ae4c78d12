"""``tv.train``: optimizers, device setters, the cluster spec (and, with storage, the Saver)."""
from .cluster import ClusterSpec
from .device_setter import replica_device_setter
from .optimizers import (AdagradOptimizer, AdamOptimizer, GradientDescentOptimizer,
                         MomentumOptimizer, Optimizer, create_global_step,
                         get_global_step, get_or_create_global_step)

__all__ = ["ClusterSpec", "replica_device_setter", "Optimizer", "GradientDescentOptimizer",
           "MomentumOptimizer", "AdagradOptimizer", "AdamOptimizer", "get_global_step",
           "get_or_create_global_step", "create_global_step"]
