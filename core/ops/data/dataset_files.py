"""The file sources of ``tv.data`` (graph side): ``TextLineDataset`` and ``TFRecordDataset``,
any fsspec URL, one file after another or ``num_parallel_reads`` at a time (TF's interleave);
their stages are in :mod:`tensorvm.ops.data.dataset_sources`."""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.tensor_conversion import convert_to_tensor
from . import dataset_sources as S
from ..common import static_value
from .dataset_ops import Dataset

__all__ = ["TFRecordDataset", "TextLineDataset"]


class _FileSource(Dataset):
    _stage = None

    def __new__(cls, filenames, compression_type=None, buffer_size=None,
                num_parallel_reads=None):
        if num_parallel_reads is None:
            return super().__new__(cls)
        # TF: the files read ``num_parallel_reads`` at a time, one record from each in turn
        # (a deterministic interleave, block_length=1)
        files = filenames if isinstance(filenames, Tensor) else \
            convert_to_tensor(np.asarray(filenames, dtype=object))
        return Dataset.from_tensor_slices(tf_reshape_1d(files)).interleave(
            lambda f: cls(f, compression_type, buffer_size), cycle_length=num_parallel_reads,
            block_length=1)

    def __init__(self, filenames, compression_type=None, buffer_size=None,
                 num_parallel_reads=None):
        if isinstance(filenames, (list, tuple)) and not filenames:
            raise InvalidArgumentError(f"{type(self).__name__}: filenames is empty")
        self._files = filenames if isinstance(filenames, Tensor) else \
            convert_to_tensor(np.asarray(filenames, dtype=object))
        if self._files.dtype != _dt.string:
            raise TypeError(f"`filenames` must be a `tf.Tensor` of `tf.string`, got "
                            f"{self._files.dtype.name}")
        comp = static_value(compression_type) if compression_type is not None else ""
        self._compression = "" if comp is None else str(np.asarray(comp, dtype=object)[()])
        super().__init__(0, [_dt.string], [()])

    def _compile(self, b):
        return self._stage(b.ref(self._files), self._compression)


def tf_reshape_1d(t: Tensor) -> Tensor:
    """A string tensor of file names as a vector (a scalar is one file)."""
    from ..array.array_ops import reshape
    return reshape(t, [-1])


class TextLineDataset(_FileSource):
    """The lines of text files (``filenames``: a URL, a list of them, or a string tensor;
    any fsspec URL), terminators removed, one file after another (``num_parallel_reads``:
    that many files at a time, a line from each in turn, as TF). ``compression_type``:
    ``""``, ``"GZIP"`` or ``"ZLIB"``. Lines are ``str`` (tensorvm's text strings)."""
    _stage = S.TextLines


class TFRecordDataset(_FileSource):
    """The records (``bytes``) of TFRecord files, verified by their CRCs; ``compression_type``
    ``""``, ``"GZIP"`` or ``"ZLIB"``; ``num_parallel_reads``: that many files at a time, a
    record from each in turn (TF's order)."""
    _stage = S.TFRecords
