"""Read variables out of a checkpoint without a graph (TF 1.x's ``tf.train.load_variable``,
``list_variables`` and ``NewCheckpointReader``), from tensorvm's checkpoints and TF 1.x's
alike. A folder means its latest checkpoint.

>>> import numpy as np, tensorvm as tv
>>> with tv.Graph().as_default():
...     v = tv.Variable(np.arange(3.0), name="v")
...     with tv.Session() as s:
...         _ = s.run(v.initializer)
...         _ = tv.train.Saver([v]).save(s, "memory://tvm-doc-ckutil/m")
>>> tv.train.list_variables("memory://tvm-doc-ckutil")
[('v', [3])]
>>> tv.train.load_variable("memory://tvm-doc-ckutil", "v")
array([0., 1., 2.])
>>> tv.train.NewCheckpointReader("memory://tvm-doc-ckutil").get_variable_to_shape_map()
{'v': [3]}
"""
from __future__ import annotations

import numpy as np

from .. import errors

__all__ = [
    "global_step_of",
    "latest_checkpoint_path",
    "list_variables",
    "load_variable",
]


def latest_checkpoint_path(ckpt_dir_or_file: str) -> str:
    """The latest checkpoint of a folder, or the path itself when it is a checkpoint."""
    from .. import storage
    from ..storage import tensor_bundle
    latest = storage.latest_checkpoint(ckpt_dir_or_file)
    if latest is not None:
        return latest
    try:
        storage.read_index(ckpt_dir_or_file)
        return ckpt_dir_or_file
    except (storage.CheckpointNotFoundError, FileNotFoundError, errors.NotFoundError):
        pass
    if tensor_bundle.is_tf_checkpoint(ckpt_dir_or_file):
        return ckpt_dir_or_file
    raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory "
                     f"{ckpt_dir_or_file}")


def _is_tf(path: str) -> bool:
    from .. import storage
    from ..storage import tensor_bundle
    try:
        storage.read_index(path)
        return False
    except (storage.CheckpointNotFoundError, FileNotFoundError):
        return tensor_bundle.is_tf_checkpoint(path)


def list_variables(ckpt_dir_or_file: str) -> list[tuple[str, list[int]]]:
    """``[(name, shape)]`` of every variable in the checkpoint, sorted by name."""
    from .. import storage
    from ..storage import tensor_bundle
    path = latest_checkpoint_path(ckpt_dir_or_file)
    if _is_tf(path):
        return [(k, list(shape)) for k, (_, shape) in tensor_bundle.list_bundle(path).items()]
    index = storage.read_index(path)
    shapes = {e["name"]: list(e.get("full_shape") or e["shape"]) for e in index["entries"]}
    return sorted(shapes.items())


def load_variable(ckpt_dir_or_file: str, name: str) -> np.ndarray:
    """The value of variable ``name`` (``"w"`` or ``"w:0"``) in the checkpoint
    (``NotFoundError`` when it holds no such variable)."""
    from .. import storage
    from ..storage import tensor_bundle
    name = name.removesuffix(":0")
    path = latest_checkpoint_path(ckpt_dir_or_file)
    names = [n for n, _ in list_variables(path)]
    if name not in names:
        raise errors.NotFoundError(f"Key {name} not found in checkpoint {path}")
    if _is_tf(path):
        return tensor_bundle.read_bundle(path, [name])[name]
    return storage.read_tensors(path, [name])[name]


def global_step_of(ckpt_dir: str) -> int:
    """The global step of the latest checkpoint in ``ckpt_dir`` (0 when there is none)."""
    try:
        return int(load_variable(ckpt_dir, "global_step"))
    except (ValueError, errors.NotFoundError, FileNotFoundError):
        return 0


class CheckpointReader:
    """TF 1.x's checkpoint reader: the tensors of one checkpoint by name."""

    def __init__(self, ckpt_dir_or_file: str):
        self._path = latest_checkpoint_path(ckpt_dir_or_file)
        self._shapes = dict(list_variables(self._path))

    def get_variable_to_shape_map(self) -> dict:
        """``{name: shape}`` of every tensor."""
        return dict(self._shapes)

    def has_tensor(self, name: str) -> bool:
        """Whether the checkpoint holds ``name``."""
        return name in self._shapes

    def get_tensor(self, name: str) -> np.ndarray:
        """The value of ``name`` (``NotFoundError`` when absent)."""
        return load_variable(self._path, name)

    def debug_string(self) -> bytes:
        """One line per tensor: its name and shape."""
        return "".join(f"{k} ({v})\n" for k, v in sorted(self._shapes.items())).encode()


def NewCheckpointReader(filepattern: str) -> CheckpointReader:
    """A :class:`CheckpointReader` of a checkpoint (or a folder's latest)."""
    return CheckpointReader(filepattern)
