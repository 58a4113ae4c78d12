"""TensorBoard's embedding projector config (TF 1.x's
``tf.contrib.tensorboard.plugins.projector``, ``tv.contrib.tensorboard.plugins.projector``).

``ProjectorConfig`` has the fields of TensorBoard's ``projector_config.proto`` (embeddings,
each with a tensor name, metadata and bookmark paths, a sprite); ``visualize_embeddings``
writes it as ``projector_config.pbtxt`` (protobuf text format) into a ``FileWriter``'s log
directory, where TensorBoard's projector plugin reads it.

>>> import os, tempfile
>>> config = ProjectorConfig()
>>> e = config.embeddings.add()
>>> e.tensor_name = "embeddings/Variable:0"
>>> e.sprite.single_image_dim.extend([28, 28])
>>> d = tempfile.mkdtemp()
>>> visualize_embeddings(d, config)
>>> print(open(os.path.join(d, PROJECTOR_FILENAME)).read(), end="")
embeddings {
  tensor_name: "embeddings/Variable:0"
  sprite {
    single_image_dim: 28
    single_image_dim: 28
  }
}
"""
from __future__ import annotations

import json

import fsspec

__all__ = [
    "PROJECTOR_FILENAME",
    "EmbeddingInfo",
    "ProjectorConfig",
    "SpriteMetadata",
    "visualize_embeddings",
]

PROJECTOR_FILENAME = "projector_config.pbtxt"


class _Message:
    """A protobuf-like message: scalar fields default to ``""``, repeated ones are lists,
    nested ones are messages; ``str()`` is protobuf's text format of the fields set."""

    _scalars: tuple = ()
    _repeated: tuple = ()
    _nested: tuple = ()  # (field name, message class) pairs

    def __init__(self, **fields):
        for name in self._scalars:
            object.__setattr__(self, name, "")
        for name in self._repeated:
            object.__setattr__(self, name, _Repeated(self._item(name)))
        for name, cls in self._nested:
            object.__setattr__(self, name, cls())
        for name, value in fields.items():
            setattr(self, name, value)

    def _item(self, name):
        return None

    def __setattr__(self, name, value):
        if name not in self._scalars:
            raise AttributeError(f"{type(self).__name__} has no settable field {name!r}")
        object.__setattr__(self, name, value)

    def _set(self) -> bool:
        return bool(str(self))

    def __str__(self):
        lines = []
        for name in self._scalars:
            value = getattr(self, name)
            if value not in ("", None):
                lines.append(f"{name}: {_literal(value)}")
        for name in self._repeated:
            for item in getattr(self, name):
                if isinstance(item, _Message):
                    lines += [f"{name} {{", *_indent(str(item)), "}"]
                else:
                    lines.append(f"{name}: {_literal(item)}")
        for name, _ in self._nested:
            sub = str(getattr(self, name))
            if sub:
                lines += [f"{name} {{", *_indent(sub), "}"]
        return "".join(line + "\n" for line in lines)

    def __repr__(self):
        return f"{type(self).__name__}({str(self).strip()!r})"


class _Repeated(list):
    def __init__(self, cls):
        super().__init__()
        self._cls = cls

    def add(self, **fields):
        """Append a new message and return it (protobuf's ``repeated.add()``)."""
        if self._cls is None:
            raise TypeError("add() is for repeated message fields; use append()")
        item = self._cls(**fields)
        self.append(item)
        return item


def _literal(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # quoted and escaped as text format reads


def _indent(text: str) -> list[str]:
    return ["  " + line for line in text.splitlines()]


class SpriteMetadata(_Message):
    """A sprite image of the embedded points: ``image_path`` and ``single_image_dim``."""
    _scalars = ("image_path",)
    _repeated = ("single_image_dim",)


class EmbeddingInfo(_Message):
    """One embedding: the tensor (``tensor_name`` or ``tensor_path``) and its labels."""
    _scalars = ("tensor_name", "metadata_path", "bookmarks_path", "tensor_path")
    _repeated = ("tensor_shape",)
    _nested = (("sprite", SpriteMetadata),)


class ProjectorConfig(_Message):
    """The projector's config: ``embeddings`` (``config.embeddings.add()``) and the
    checkpoint to read them from."""
    _scalars = ("model_checkpoint_path", "model_checkpoint_dir")
    _repeated = ("embeddings",)

    def _item(self, name):
        return EmbeddingInfo


def visualize_embeddings(summary_writer, config: ProjectorConfig) -> None:
    """Write ``config`` to ``projector_config.pbtxt`` in ``summary_writer``'s log directory
    (a ``FileWriter``, or the directory itself)."""
    logdir = summary_writer.get_logdir() if hasattr(summary_writer, "get_logdir") \
        else summary_writer
    if logdir is None:
        raise ValueError("Summary writer must have a logdir")
    with fsspec.open(f"{str(logdir).rstrip('/')}/{PROJECTOR_FILENAME}", "w") as f:
        f.write(str(config))
