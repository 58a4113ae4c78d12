"""TF 1.x's ``tensorflow.examples.tutorials.mnist.input_data``: MNIST from its IDX files.

``read_data_sets(train_dir)`` reads the four files of MNIST (``train-images-idx3-ubyte.gz``,
``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz``;
the un-gzipped files are read too) from ``train_dir`` (any fsspec URL) and returns
``Datasets(train, validation, test)``, the first ``validation_size`` training examples being the
validation set, as TF's does. Images are ``float32`` in [0, 1] (``dtype=tv.uint8`` keeps the
bytes), flattened to 784 values unless ``reshape=False``; labels are class numbers, or one-hot
rows with ``one_hot=True``. :meth:`DataSet.next_batch` shuffles and wraps epochs as TF's
does, with NumPy's global random state.

Nothing is downloaded: where a file is missing, ``FileNotFoundError`` names the directory,
every missing file and where to get them (tensorvm's machines often have no network; a
download that hangs is worse than a clear error).

>>> import gzip, os, tempfile, numpy as np
>>> d = tempfile.mkdtemp()
>>> for name, magic, arr in [("train-images-idx3-ubyte.gz", 2051, np.zeros((6, 28, 28), np.uint8)),
...                          ("train-labels-idx1-ubyte.gz", 2049, np.arange(6, dtype=np.uint8)),
...                          ("t10k-images-idx3-ubyte.gz", 2051, np.full((2, 28, 28), 255, np.uint8)),
...                          ("t10k-labels-idx1-ubyte.gz", 2049, np.array([3, 4], np.uint8))]:
...     write_idx(os.path.join(d, name), arr)
>>> mnist = read_data_sets(d, one_hot=True, validation_size=2)
>>> mnist.train.num_examples, mnist.validation.labels.argmax(1).tolist(), float(mnist.test.images.max())
(4, [0, 1], 1.0)
"""
from __future__ import annotations

import collections
import gzip
import io
import logging
import posixpath

import fsspec
import numpy as np

__all__ = [
    "FILES",
    "SOURCE_URL",
    "DataSet",
    "Datasets",
    "dense_to_one_hot",
    "extract_images",
    "extract_labels",
    "load_mnist",
    "read_data_sets",
    "write_idx",
]

logger = logging.getLogger("tensorvm")

SOURCE_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
TRAIN_IMAGES = "train-images-idx3-ubyte.gz"
TRAIN_LABELS = "train-labels-idx1-ubyte.gz"
TEST_IMAGES = "t10k-images-idx3-ubyte.gz"
TEST_LABELS = "t10k-labels-idx1-ubyte.gz"
FILES = (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)
_IMAGES_MAGIC, _LABELS_MAGIC = 2051, 2049

Datasets = collections.namedtuple("Datasets", ["train", "validation", "test"])


def _read32(f) -> int:
    return int(np.frombuffer(f.read(4), dtype=">u4")[0])


def extract_images(f):
    """The images of an IDX3 stream (gzip) as ``uint8 [index, y, x, 1]``.

    Raises ``ValueError`` on a bad magic number, as TF's does."""
    name = getattr(f, "name", "<stream>")
    with gzip.GzipFile(fileobj=f) as stream:
        magic = _read32(stream)
        if magic != _IMAGES_MAGIC:
            raise ValueError(f"Invalid magic number {magic} in MNIST image file: {name}")
        n, rows, cols = _read32(stream), _read32(stream), _read32(stream)
        data = np.frombuffer(stream.read(rows * cols * n), dtype=np.uint8)
    if data.size != n * rows * cols:
        raise ValueError(f"MNIST image file {name} is truncated: {data.size} of "
                         f"{n * rows * cols} bytes")
    return data.reshape(n, rows, cols, 1)


def dense_to_one_hot(labels_dense, num_classes: int):
    """Class labels ``[n]`` to one-hot rows ``[n, num_classes]`` (float64, as TF's)."""
    labels_dense = np.asarray(labels_dense)
    out = np.zeros((labels_dense.shape[0], num_classes))
    out.flat[np.arange(labels_dense.shape[0]) * num_classes + labels_dense.ravel()] = 1
    return out


def extract_labels(f, one_hot: bool = False, num_classes: int = 10):
    """The labels of an IDX1 stream (gzip) as ``uint8 [index]`` (one-hot with ``one_hot``)."""
    name = getattr(f, "name", "<stream>")
    with gzip.GzipFile(fileobj=f) as stream:
        magic = _read32(stream)
        if magic != _LABELS_MAGIC:
            raise ValueError(f"Invalid magic number {magic} in MNIST label file: {name}")
        n = _read32(stream)
        labels = np.frombuffer(stream.read(n), dtype=np.uint8)
    if labels.size != n:
        raise ValueError(f"MNIST label file {name} is truncated: {labels.size} of {n} labels")
    return dense_to_one_hot(labels, num_classes) if one_hot else labels


def write_idx(path: str, array) -> None:
    """Write a ``uint8`` array as a gzip IDX file (labels ``[n]``: IDX1; images
    ``[n, rows, cols]``: IDX3), the format :func:`read_data_sets` reads."""
    a = np.ascontiguousarray(array, dtype=np.uint8)
    magic = {1: _LABELS_MAGIC, 3: _IMAGES_MAGIC}.get(a.ndim)
    if magic is None:
        raise ValueError(f"write_idx: labels [n] or images [n, rows, cols], got shape {a.shape}")
    header = np.array([magic, *a.shape], dtype=">u4").tobytes()
    with fsspec.open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(header + a.tobytes())


class DataSet:
    """Images and labels with TF's ``next_batch`` (shuffled each epoch; a batch that crosses an
    epoch's end takes the old epoch's rest and the new epoch's start)."""

    def __init__(self, images, labels, fake_data: bool = False, one_hot: bool = False,
                 dtype=None, reshape: bool = True, seed=None):
        from ...framework import dtypes as _dtypes
        dtype = _dtypes.as_dtype(dtype if dtype is not None else _dtypes.float32)
        if dtype not in (_dtypes.uint8, _dtypes.float32):
            raise TypeError(f"Invalid image dtype {dtype!r}, expected uint8 or float32")
        np.random.seed(seed)  # TF seeds NumPy's global state here (None: from the OS)
        if fake_data:
            self._num_examples = 10000
            self.one_hot = one_hot
        else:
            images, labels = np.asarray(images), np.asarray(labels)
            if images.shape[0] != labels.shape[0]:
                raise ValueError(f"images.shape: {images.shape} labels.shape: {labels.shape}")
            self._num_examples = images.shape[0]
            if reshape:
                if images.ndim != 4 or images.shape[3] != 1:
                    raise ValueError(f"reshape=True needs images [n, rows, cols, 1], got "
                                     f"{images.shape}")
                images = images.reshape(images.shape[0], images.shape[1] * images.shape[2])
            if dtype == _dtypes.float32:
                images = images.astype(np.float32) * np.float32(1.0 / 255.0)
        self._images = images
        self._labels = labels
        self._epochs_completed = 0
        self._index_in_epoch = 0

    @property
    def images(self):
        return self._images

    @property
    def labels(self):
        return self._labels

    @property
    def num_examples(self) -> int:
        return self._num_examples

    @property
    def epochs_completed(self) -> int:
        return self._epochs_completed

    def __repr__(self):
        return f"<DataSet {self._num_examples} examples, epoch {self._epochs_completed}>"

    def next_batch(self, batch_size: int, fake_data: bool = False, shuffle: bool = True):
        """The next ``batch_size`` examples ``(images, labels)``."""
        if fake_data:
            fake_image = [1] * 784
            fake_label = [1] + [0] * 9 if self.one_hot else 0
            return ([fake_image for _ in range(batch_size)],
                    [fake_label for _ in range(batch_size)])
        start = self._index_in_epoch
        if self._epochs_completed == 0 and start == 0 and shuffle:
            self._permute()
        if start + batch_size > self._num_examples:
            self._epochs_completed += 1
            images_rest = self._images[start:self._num_examples]
            labels_rest = self._labels[start:self._num_examples]
            if shuffle:
                self._permute()
            self._index_in_epoch = batch_size - (self._num_examples - start)
            end = self._index_in_epoch
            return (np.concatenate((images_rest, self._images[:end]), axis=0),
                    np.concatenate((labels_rest, self._labels[:end]), axis=0))
        self._index_in_epoch += batch_size
        end = self._index_in_epoch
        return self._images[start:end], self._labels[start:end]

    def _permute(self):
        perm = np.arange(self._num_examples)
        np.random.shuffle(perm)
        self._images = self._images[perm]
        self._labels = self._labels[perm]


def _open(train_dir: str, name: str):
    """The bytes of ``name`` in ``train_dir`` as a gzip stream (the plain file gzipped in
    memory where only it exists); None where neither exists."""
    fs, root = fsspec.core.url_to_fs(train_dir)
    path = posixpath.join(root, name)
    if fs.exists(path):
        with fs.open(path, "rb") as f:
            data = f.read()
    elif fs.exists(path[:-3]):
        with fs.open(path[:-3], "rb") as f:
            data = gzip.compress(f.read(), mtime=0)
    else:
        return None
    stream = io.BytesIO(data)
    stream.name = path
    return stream


def load_mnist(train_dir: str) -> dict:
    """The four files' streams, keyed by name; ``FileNotFoundError`` naming every missing
    one."""
    streams = {name: _open(train_dir, name) for name in FILES}
    missing = [name for name, s in streams.items() if s is None]
    if missing:
        raise FileNotFoundError(
            f"MNIST files missing in {train_dir!r}: {', '.join(missing)} (tensorvm does not "
            f"download them: put the IDX .gz files there, e.g. from {SOURCE_URL}<name>)")
    return streams


def read_data_sets(train_dir, fake_data: bool = False, one_hot: bool = False, dtype=None,
                   reshape: bool = True, validation_size: int = 5000, seed=None,
                   source_url: str = SOURCE_URL) -> Datasets:
    """MNIST's train/validation/test :class:`DataSet` from ``train_dir`` (see the module
    docstring). ``source_url`` is accepted for TF's signature; nothing is downloaded."""
    if fake_data:
        def fake():
            return DataSet([], [], fake_data=True, one_hot=one_hot, dtype=dtype, seed=seed)
        return Datasets(train=fake(), validation=fake(), test=fake())
    streams = load_mnist(str(train_dir))
    for name in FILES:
        logger.info("Extracting %s", streams[name].name)
    train_images = extract_images(streams[TRAIN_IMAGES])
    train_labels = extract_labels(streams[TRAIN_LABELS], one_hot=one_hot)
    test_images = extract_images(streams[TEST_IMAGES])
    test_labels = extract_labels(streams[TEST_LABELS], one_hot=one_hot)
    if not 0 <= validation_size <= len(train_images):
        raise ValueError(f"Validation size should be between 0 and {len(train_images)}. "
                         f"Received: {validation_size}.")
    options = {"dtype": dtype, "reshape": reshape, "seed": seed}
    validation = DataSet(train_images[:validation_size], train_labels[:validation_size],
                         **options)
    train = DataSet(train_images[validation_size:], train_labels[validation_size:], **options)
    test = DataSet(test_images, test_labels, **options)
    return Datasets(train=train, validation=validation, test=test)

