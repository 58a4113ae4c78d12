"""The module paths of tensorvm before ``core/`` was laid out by layer, kept importing.

``import tensorvm.session`` or ``from tensorvm.ops.math_ops import add`` still work: a finder on
``sys.meta_path`` answers each old name with the module that now holds the code (the same module
object, so ``isinstance``, monkeypatching and pickles agree). New code imports the new paths;
``tensorvm.runtime`` is the runtime package now (the interpreter that was there is
``tensorvm.vm.interpreter``).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

# old path -> new path, both under ``tensorvm.``. Not here: ``gradients``, ``variable_scope``
# and ``ops.while_loop``, whose old module paths are also public names (``tv.gradients`` is
# the function): the import system would set the name to the module it loaded.
MOVED = {
    "app": "tf_api.app",
    "backends": "runtime.backends",
    "cluster": "runtime.cluster.spec",
    "cluster_events": "runtime.cluster.events",
    "compat": "tf_api.compat",
    "config_options": "runtime.config_options",
    "contrib": "tf_api.contrib",
    "cpu_accel": "vm.kernels.cpu_accel",
    "data": "tf_api.data",
    "device_map": "runtime.cluster.device_map",
    "device_spec": "framework.device_spec",
    "direct_steps": "runtime.direct.client",
    "distributed_backend": "runtime.dask_plane",
    "dtypes": "framework.dtypes",
    "errors": "framework.errors",
    "framework_api": "tf_api.framework_api",
    "gfile": "tf_api.gfile",
    "graph": "framework.graph",
    "graph_def": "framework.graph_def",
    "graph_keys": "framework.graph_keys",
    "image": "tf_api.image",
    "indexed_slices": "framework.indexed_slices",
    "init_ops": "ops.state.init_ops",
    "job_api": "runtime.job_api",
    "kernels_gpu": "vm.kernels.array_api",
    "layers": "tf_api.layers",
    "local_cluster": "runtime.cluster.local",
    "lookup": "tf_api.lookup",
    "losses": "tf_api.losses",
    "math_api": "tf_api.math_api",
    "metrics": "tf_api.metrics",
    "node_def": "framework.node_def",
    "op_def_library": "framework.op_def_library",
    "ops.array_ops": "ops.array.array_ops",
    "ops.clip_ops": "ops.math.clip_ops",
    "ops.control_flow_ops": "ops.control.control_flow_ops",
    "ops.ctc_ops": "ops.nn.ctc_ops",
    "ops.data_flow_ops": "ops.state.data_flow_ops",
    "ops.dataset_cache": "ops.data.dataset_cache",
    "ops.dataset_csv": "ops.data.dataset_csv",
    "ops.dataset_files": "ops.data.dataset_files",
    "ops.dataset_groups": "ops.data.dataset_groups",
    "ops.dataset_misc": "ops.data.dataset_misc",
    "ops.dataset_ops": "ops.data.dataset_ops",
    "ops.dataset_pipeline": "ops.data.dataset_pipeline",
    "ops.dataset_records": "ops.data.dataset_records",
    "ops.dataset_sources": "ops.data.dataset_sources",
    "ops.dataset_sparse": "ops.data.dataset_sparse",
    "ops.dataset_transforms": "ops.data.dataset_transforms",
    "ops.dataset_windows": "ops.data.dataset_windows",
    "ops.debug_ops": "ops.control.debug_ops",
    "ops.file_ops": "ops.readers.file_ops",
    "ops.fill_ops": "ops.array.fill_ops",
    "ops.functional_ops": "ops.control.functional_ops",
    "ops.image_box_ops": "ops.image.image_box_ops",
    "ops.image_codec_ops": "ops.image.image_codec_ops",
    "ops.image_ops": "ops.image.image_ops",
    "ops.index_ops": "ops.array.index_ops",
    "ops.io_ops": "ops.readers.io_ops",
    "ops.iterator_ops": "ops.data.iterator_ops",
    "ops.linalg_ops": "ops.math.linalg_ops",
    "ops.manip_ops": "ops.array.manip_ops",
    "ops.mapreduce_ops": "ops.mapreduce.mapreduce_ops",
    "ops.math_ext": "ops.math.math_ext",
    "ops.math_ops": "ops.math.math_ops",
    "ops.mr_read": "ops.mapreduce.mr_read",
    "ops.mr_values": "ops.mapreduce.mr_values",
    "ops.nn_conv": "ops.nn.nn_conv",
    "ops.nn_conv3d": "ops.nn.nn_conv3d",
    "ops.nn_conv3d_accel": "ops.nn.nn_conv3d_accel",
    "ops.nn_conv_accel": "ops.nn.nn_conv_accel",
    "ops.nn_conv_ext": "ops.nn.nn_conv_ext",
    "ops.nn_conv_grads": "ops.nn.nn_conv_grads",
    "ops.nn_ctc_ext": "ops.nn.nn_ctc_ext",
    "ops.nn_deconv": "ops.nn.nn_deconv",
    "ops.nn_dilation": "ops.nn.nn_dilation",
    "ops.nn_misc_ext": "ops.nn.nn_misc_ext",
    "ops.nn_norm": "ops.nn.nn_norm",
    "ops.nn_ops": "ops.nn.nn_ops",
    "ops.nn_pool3d": "ops.nn.nn_pool3d",
    "ops.nn_pool_ext": "ops.nn.nn_pool_ext",
    "ops.nn_rnn_ext": "tf_api.rnn_ext",
    "ops.nn_sampled": "ops.nn.nn_sampled",
    "ops.nn_sampler_ext": "ops.nn.nn_sampler_ext",
    "ops.nn_softmax": "ops.nn.nn_softmax",
    "ops.parsing_ops": "ops.readers.parsing_ops",
    "ops.partition_ops": "ops.array.partition_ops",
    "ops.random_ops": "ops.math.random_ops",
    "ops.rnn_ops": "ops.nn.rnn_ops",
    "ops.script_ops": "ops.control.script_ops",
    "ops.slice_ops": "ops.array.slice_ops",
    "ops.sort_ops": "ops.array.sort_ops",
    "ops.sparse_ops": "ops.array.sparse_ops",
    "ops.special_ops": "ops.math.special_ops",
    "ops.state_ops": "ops.state.state_ops",
    "ops.string_ext_ops": "ops.strings.string_ext_ops",
    "ops.string_ops": "ops.strings.string_ops",
    "ops.tensor_array": "ops.control.tensor_array",
    "ops.tensor_array_ops": "ops.control.tensor_array_ops",
    "ops.tensor_array_value": "ops.control.tensor_array_value",
    "ops.training_ops": "ops.state.training_ops",
    "ops.while_frames": "ops.control.while_frames",
    "projector": "tf_api.projector",
    "py_func_check": "passes.py_func_check",
    "queues": "vm.queues",
    "random_api": "tf_api.random_api",
    "registered_plans": "runtime.direct.registered_plans",
    "registry": "framework.op_registry",
    "rendezvous": "runtime.direct.rendezvous",
    "rnn": "tf_api.rnn",
    "rnn_cell": "tf_api.rnn_cell",
    "session": "runtime.session",
    "sparse": "tf_api.sparse",
    "sparse_tensor": "framework.sparse_tensor",
    "step_graph": "runtime.dask_graph",
    "summary": "tf_api.summary",
    "tensor_conversion": "framework.tensor_conversion",
    "tf_logging": "tf_api.tf_logging",
    "tf_misc": "tf_api.tf_misc",
    "tf_shim": "tf_api.tf_shim",
    "threads": "vm.kernels.threads",
    "timeline": "runtime.timeline",
    "train.partitioners": "ops.state.partitioners",
    "variables": "ops.state.variables",
    "worker_signals": "runtime.cluster.worker_signals",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module):
        # The target module ran when it was imported; the import system has just set its
        # __spec__ to this alias's spec: give the module back its own.
        module.__spec__ = self._spec

    # ``python -m tensorvm.<old path>`` (runpy asks the loader for the code to run as __main__)
    def _target_loader(self):
        return importlib.util.find_spec(self.target).loader

    def get_code(self, fullname):
        return self._target_loader().get_code(self.target)

    def is_package(self, fullname):
        return self._target_loader().is_package(self.target)

    def get_filename(self, fullname):
        return self._target_loader().get_filename(self.target)


class AliasFinder(importlib.abc.MetaPathFinder):
    """Resolves ``tensorvm.<old path>`` to ``tensorvm.<new path>``."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("tensorvm."):
            return None
        new = MOVED.get(fullname[len("tensorvm."):])
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias("tensorvm." + new))


def moved_module(name: str):
    """The module that ``tensorvm.<name>`` was before the move, or None."""
    if name not in MOVED:
        return None
    return importlib.import_module("tensorvm." + name)


def install() -> None:
    """Put the finder first on ``sys.meta_path``: an old path is always the moved module, even
    where a stale copy of the old file sits in the install (a wheel built in a checkout whose
    ``build/`` predates the move carries one); it answers only the names in :data:`MOVED`."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())
