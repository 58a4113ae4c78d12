"""``tv.data``: TF 1.x's graph-mode ``tf.data`` (``import tensorvm as tf; tf.data.Dataset``).

Datasets are in :mod:`tensorvm.ops.data.dataset_ops`, iterators in :mod:`tensorvm.ops.data.iterator_ops`
(their docstrings hold the design); the pipeline that runs inside an iterator is
:mod:`tensorvm.ops.data.dataset_pipeline`. Components may be ``tv.SparseTensor`` s (a ``map`` that
parses a ``VarLenFeature``, ``from_tensor_slices`` of one): see
:mod:`tensorvm.ops.data.dataset_sparse`.

>>> import tensorvm as tv
>>> nxt = tv.data.Dataset.from_tensor_slices(([1, 2, 3], [4, 5, 6])).batch(2) \\
...     .make_one_shot_iterator().get_next()
>>> with tv.Session() as s:
...     [x.tolist() for x in s.run(nxt)]
[[1, 2], [4, 5]]
"""
from __future__ import annotations

from ..ops.data.dataset_files import TextLineDataset, TFRecordDataset
from ..ops.data.dataset_misc import Options
from ..ops.data.dataset_ops import Dataset
from ..ops.data.iterator_ops import Iterator
from ..ops.data.iterator_ops import Optional as _Optional

__all__ = [
    "Dataset",
    "Iterator",
    "Options",
    "TFRecordDataset",
    "TextLineDataset",
    "experimental",
    "get_output_classes",
    "get_output_shapes",
    "get_output_types",
    "make_initializable_iterator",
    "make_one_shot_iterator",
]


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    """``dataset.make_one_shot_iterator()`` (TF 1.13+'s ``tf.compat.v1.data`` spelling)."""
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset: Dataset, shared_name=None) -> Iterator:
    """``dataset.make_initializable_iterator()`` (``tf.compat.v1.data`` spelling)."""
    return dataset.make_initializable_iterator(shared_name)


def get_output_types(dataset_or_iterator):
    """The (nested) dtypes of the elements."""
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator):
    """The (nested) static shapes of the elements."""
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator):
    """The (nested) classes of the elements (``tv.Tensor`` or ``tv.SparseTensor``)."""
    return dataset_or_iterator.output_classes


class experimental:
    """``tf.data.experimental``: ``AUTOTUNE`` and the transformations TF 1.x programs
    ``apply``."""

    Optional = _Optional

    AUTOTUNE = -1
    INFINITE_CARDINALITY = -1
    UNKNOWN_CARDINALITY = -2
    Options = Options

    @staticmethod
    def get_next_as_optional(iterator):
        """The next element of ``iterator`` as an :class:`Optional` (empty at the end of the
        data, instead of ``OutOfRangeError``); each run reads one element."""
        from ..ops.data.iterator_ops import get_next_as_optional
        return get_next_as_optional(iterator)

    @staticmethod
    def dense_to_sparse_batch(batch_size, row_shape):
        """``batch_size`` consecutive elements (one tensor each, of ``row_shape``'s rank and
        at most its dims) as one SparseTensor of all their entries, dense shape
        ``[n] + row_shape`` (a ``None``/-1 dim: the batch's largest)."""
        from ..ops.data.dataset_transforms import dense_to_sparse_batch
        return lambda ds: dense_to_sparse_batch(ds, batch_size, row_shape)

    @staticmethod
    def cardinality(dataset):
        """The number of elements as an int64 scalar tensor (-1: endless, -2: unknown)."""
        from ..ops.data.dataset_misc import cardinality
        return cardinality(dataset)

    @staticmethod
    def Counter(start=0, step=1, dtype=None):
        """``start, start + step, ...`` without end."""
        from ..ops.data.dataset_misc import counter
        return counter(start, step, dtype or "int64")

    @staticmethod
    def choose_from_datasets(datasets, choice_dataset):
        """The element of ``datasets[c]`` for each ``c`` of ``choice_dataset``."""
        from ..ops.data.dataset_misc import choose_from_datasets
        return choose_from_datasets(datasets, choice_dataset)

    @staticmethod
    def sample_from_datasets(datasets, weights=None, seed=None):
        """Elements of ``datasets`` drawn at random with probabilities ``weights``."""
        from ..ops.data.dataset_misc import sample_from_datasets
        return sample_from_datasets(datasets, weights, seed)

    @staticmethod
    def copy_to_device(target_device, source_device="/cpu:0"):
        """The dataset unchanged: its iterator's ops are placed where they are built."""
        return lambda ds: ds

    @staticmethod
    def prefetch_to_device(device, buffer_size=None):
        """The dataset unchanged: its iterator's ops are placed where they are built."""
        return lambda ds: ds

    @staticmethod
    def unbatch():
        """``dataset.apply(tv.data.experimental.unbatch())``."""
        return lambda ds: ds.unbatch()

    @staticmethod
    def shuffle_and_repeat(buffer_size, count=None, seed=None):
        """``shuffle(buffer_size, seed).repeat(count)``."""
        return lambda ds: ds.shuffle(buffer_size, seed).repeat(count)

    @staticmethod
    def map_and_batch(map_func, batch_size, num_parallel_batches=None, drop_remainder=False,
                      num_parallel_calls=None):
        """``map(map_func).batch(batch_size, drop_remainder)``."""
        return lambda ds: ds.map(map_func).batch(batch_size, drop_remainder)

    @staticmethod
    def parallel_interleave(map_func, cycle_length, block_length=1, sloppy=False,
                            buffer_output_elements=None, prefetch_input_elements=None):
        """``interleave(map_func, cycle_length, block_length)`` (in order, ``sloppy`` or
        not)."""
        return lambda ds: ds.interleave(map_func, cycle_length, block_length)

    @staticmethod
    def scan(initial_state, scan_func):
        """``dataset.scan(initial_state, scan_func)``: ``scan_func(state, element)`` returns
        ``(new_state, output)``."""
        return lambda ds: ds.scan(initial_state, scan_func)

    @staticmethod
    def take_while(predicate):
        """``dataset.take_while(predicate)``."""
        return lambda ds: ds.take_while(predicate)

    @staticmethod
    def ignore_errors():
        """``dataset.ignore_errors()``."""
        return lambda ds: ds.ignore_errors()

    @staticmethod
    def unique():
        """``dataset.unique()``."""
        return lambda ds: ds.unique()

    @staticmethod
    def enumerate_dataset(start=0):
        """``dataset.enumerate(start)``: ``(index, element)`` pairs."""
        return lambda ds: ds.enumerate(start)

    @staticmethod
    def get_single_element(dataset):
        """The one element of ``dataset``, as tensors (``InvalidArgumentError`` when it has
        none or more than one)."""
        return dataset.get_single_element()

    class TFRecordWriter:
        """Writes a dataset of scalar strings to a TFRecord file:
        ``tv.data.experimental.TFRecordWriter(filename, compression_type).write(ds)`` is
        the op to run."""

        def __init__(self, filename, compression_type=None):
            self._filename, self._compression = filename, compression_type

        def write(self, dataset):
            """The op that writes every element of ``dataset`` as one record."""
            from ..ops.data.iterator_ops import write_tfrecord
            return write_tfrecord(dataset, self._filename, self._compression)

    @staticmethod
    def CsvDataset(filenames, record_defaults, compression_type=None, buffer_size=None,
                   header=False, field_delim=",", use_quote_delim=True, na_value="",
                   select_cols=None):
        """A tuple of one scalar per (selected) column for each CSV record of the files."""
        from ..ops.data.dataset_csv import csv_dataset
        return csv_dataset(filenames, record_defaults, compression_type, buffer_size, header,
                           field_delim, use_quote_delim, na_value, select_cols)

    @staticmethod
    def make_csv_dataset(file_pattern, batch_size, column_names=None, column_defaults=None,
                         label_name=None, select_columns=None, field_delim=",",
                         use_quote_delim=True, na_value="", header=True, num_epochs=None,
                         shuffle=True, shuffle_buffer_size=10000, shuffle_seed=None,
                         prefetch_buffer_size=None, num_parallel_reads=1, sloppy=False,
                         num_rows_for_inference=100, compression_type=None,
                         ignore_errors=False):
        """Batches of ``(features, label)`` dicts read from CSV files, column names from
        the header and types inferred from the first rows (TF 1.15's construction)."""
        from ..ops.data.dataset_csv import make_csv_dataset
        return make_csv_dataset(file_pattern, batch_size, column_names, column_defaults,
                                label_name, select_columns, field_delim, use_quote_delim,
                                na_value, header, num_epochs, shuffle, shuffle_buffer_size,
                                shuffle_seed, prefetch_buffer_size, num_parallel_reads,
                                sloppy, num_rows_for_inference, compression_type,
                                ignore_errors)

    @staticmethod
    def parse_example_dataset(features, num_parallel_calls=1):
        """``dataset.apply(...)``: each element (a vector of serialized
        ``tf.train.Example`` s) parsed into a dict of tensors and SparseTensors."""
        from ..ops.data.dataset_records import parse_example_dataset
        return parse_example_dataset(features, num_parallel_calls)

    @staticmethod
    def make_batched_features_dataset(file_pattern, batch_size, features, reader=None,
                                      label_key=None, reader_args=None, num_epochs=None,
                                      shuffle=True, shuffle_buffer_size=10000,
                                      shuffle_seed=None, prefetch_buffer_size=None,
                                      reader_num_threads=None, parser_num_threads=None,
                                      sloppy_ordering=False, drop_final_batch=False):
        """Batches of parsed ``tf.train.Example`` s (dicts of tensors and SparseTensors, or
        ``(features, label)``) read from TFRecord files (TF 1.15's construction)."""
        from ..ops.data.dataset_records import make_batched_features_dataset
        return make_batched_features_dataset(
            file_pattern, batch_size, features, reader, label_key, reader_args, num_epochs,
            shuffle, shuffle_buffer_size, shuffle_seed, prefetch_buffer_size,
            reader_num_threads, parser_num_threads, sloppy_ordering, drop_final_batch)

    @staticmethod
    def group_by_window(key_func, reduce_func, window_size=None, window_size_func=None):
        """Elements grouped by ``key_func`` (an int64 scalar); each group of
        ``window_size`` (or ``window_size_func(key)``) elements, and at the end each
        remaining group in key order, becomes the dataset ``reduce_func(key, window)``."""
        from ..ops.data.dataset_groups import group_by_window
        return group_by_window(key_func, reduce_func, window_size, window_size_func)

    @staticmethod
    def group_by_reducer(key_func, reducer):
        """One output per key (in increasing key order): ``reducer``'s state folded over
        the key's elements, then finalized."""
        from ..ops.data.dataset_groups import group_by_reducer
        return group_by_reducer(key_func, reducer)

    @staticmethod
    def Reducer(init_func, reduce_func, finalize_func):
        """``tf.data.experimental.Reducer``: the three functions of ``group_by_reducer``."""
        from ..ops.data.dataset_groups import Reducer
        return Reducer(init_func, reduce_func, finalize_func)

    @staticmethod
    def bucket_by_sequence_length(element_length_func, bucket_boundaries, bucket_batch_sizes,
                                  padded_shapes=None, padding_values=None,
                                  pad_to_bucket_boundary=False, no_padding=False,
                                  drop_remainder=False):
        """Elements padded-batched with others of similar length (by
        ``bucket_boundaries``, ``bucket_batch_sizes[i]`` per batch of bucket ``i``)."""
        from ..ops.data.dataset_groups import bucket_by_sequence_length
        return bucket_by_sequence_length(element_length_func, bucket_boundaries,
                                         bucket_batch_sizes, padded_shapes, padding_values,
                                         pad_to_bucket_boundary, no_padding, drop_remainder)

    @staticmethod
    def batch_and_drop_remainder(batch_size):
        """``batch(batch_size, drop_remainder=True)`` (``tf.contrib.data``'s spelling)."""
        return lambda ds: ds.batch(batch_size, drop_remainder=True)
