"""TFRecord input for ``tv.data`` in TF 1.x's helpers: ``tf.data.experimental.
parse_example_dataset`` and ``make_batched_features_dataset`` (TF's construction, step by step).

``make_batched_features_dataset`` lists the files matching the pattern (shuffled unless
``shuffle=False``), reads them ``reader_num_threads`` at a time one record from each in turn
(TF's ``parallel_interleave``; ``reader`` is a dataset class such as ``TFRecordDataset``),
``shuffle`` then ``repeat(num_epochs)``, ``batch`` (the remainder dropped when ``num_epochs``
is None or ``drop_final_batch``), ``parse_example`` of each batch (a ``VarLenFeature`` gives a
SparseTensor), and with ``label_key`` the ``(features, label)`` pair.

>>> import tensorvm as tv, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
>>> with tv.python_io.TFRecordWriter(path) as w:
...     for i in range(3):
...         w.write(tv.train.Example(features=tv.train.Features(feature={"x": tv.train.Feature(
...             int64_list=tv.train.Int64List(value=list(range(i))))})).SerializeToString())
>>> ds = tv.data.experimental.make_batched_features_dataset(
...     path, 3, {"x": tv.VarLenFeature(tv.int64)}, shuffle=False, num_epochs=1)
>>> with tv.Session() as s: s.run(ds.make_one_shot_iterator().get_next()["x"]).values.tolist()
[0, 0, 1]
"""
from __future__ import annotations

from ...framework import dtypes as _dt

__all__: list[str] = []  # reached through tv.data.experimental


def parse_example_dataset(features, num_parallel_calls=1):
    """``dataset.apply(parse_example_dataset(features))``: each element (a vector of
    serialized ``tf.train.Example`` s) parsed by ``parse_example`` into a dict of tensors and
    SparseTensors."""
    from ..readers.parsing_ops import parse_example
    if not features:
        raise ValueError("Argument `features` cannot be None.")

    def apply(ds):
        if ds._dtypes != (_dt.string,):
            raise TypeError(f"Input dataset should be a dataset of vectors of strings, got "
                            f"{ds.output_types}")
        return ds.map(lambda serialized: parse_example(serialized, features))
    return apply


def make_batched_features_dataset(file_pattern, batch_size, features, reader=None,
                                  label_key=None, reader_args=None, num_epochs=None,
                                  shuffle=True, shuffle_buffer_size=10000, shuffle_seed=None,
                                  prefetch_buffer_size=None, reader_num_threads=None,
                                  parser_num_threads=None, sloppy_ordering=False,
                                  drop_final_batch=False):
    """Batches of parsed ``tf.train.Example`` s read from the files matching
    ``file_pattern``: dicts of tensors and SparseTensors, or ``(features, label)`` with
    ``label_key`` (see the module docstring)."""
    from .dataset_files import TFRecordDataset
    from .dataset_ops import Dataset
    from ..readers.io_ops import ReaderBase
    reader = TFRecordDataset if reader is None else reader
    if isinstance(reader, type) and issubclass(reader, ReaderBase):
        raise TypeError("The `reader` argument must return a `Dataset` object. "
                        "`tf.ReaderBase` subclasses are not supported. For example, pass "
                        "`tf.data.TFRecordDataset` instead of `tf.TFRecordReader`.")
    if label_key and label_key not in features:
        raise ValueError(f"The `label_key` provided ({label_key}) must be one of the "
                         f"`features` keys: {features.keys()}.")
    args = list(reader_args or [])
    ds = Dataset.list_files(file_pattern, shuffle=shuffle, seed=shuffle_seed)
    ds = ds.interleave(lambda f: reader(f, *args), cycle_length=reader_num_threads or 1,
                       block_length=1)
    if ds._dtypes == (_dt.string, _dt.string):  # (key, value) records: the values
        ds = ds.map(lambda _, v: v)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, shuffle_seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=drop_final_batch or num_epochs is None)
    ds = ds.apply(parse_example_dataset(features, parser_num_threads))
    if label_key:
        ds = ds.map(lambda x: (x, x.pop(label_key)))
    return ds.prefetch(prefetch_buffer_size or -1)
