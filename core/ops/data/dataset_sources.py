"""The sources of a ``tv.data`` pipeline, as stages of :mod:`tensorvm.ops.data.dataset_pipeline`:
slices and whole tensors, ranges, zips and concatenations, the lines of text files and the
records of TFRecord files (any fsspec URL, read by :mod:`tensorvm.storage`), and Python
generators (``Dataset.from_generator``).

Sources cut what they read into blocks of at most :data:`~tensorvm.ops.data.dataset_pipeline.CHUNK`
rows without copying (a slice of the array it was given), so a later ``batch`` reshapes
instead of looping over records.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...framework.errors import DataLossError, InvalidArgumentError, NotFoundError
from .dataset_pipeline import CHUNK, Env, Ref, Stage, _count, _obj, _rows, as_component


class Rows(tuple):
    """Elements of different shapes handed to a traced function as one component (a group of
    ``group_by_window``, whose function slices it again): one array per element."""


def _ragged_slices(vals, dtypes):
    comps = [v if isinstance(v, Rows) else as_component(v, d) for v, d in zip(vals, dtypes)]
    for i in range(len(comps[0])):
        yield tuple(as_component(c[i], d)[None] if isinstance(c, Rows) else c[i:i + 1]
                    for c, d in zip(comps, dtypes))


@dataclass
class TensorSlices(Stage):
    comps: tuple  # Refs
    dtypes: tuple

    def blocks(self, env):
        vals = [r.get(env) for r in self.comps]
        if any(isinstance(v, Rows) for v in vals):
            yield from _ragged_slices(vals, self.dtypes)
            return
        arrs = [as_component(v, d) for v, d in zip(vals, self.dtypes)]
        n = {a.shape[0] if a.ndim else None for a in arrs}
        if None in n:
            raise InvalidArgumentError("Unbatching a tensor is only supported for rank >= 1")
        if len(n) != 1:
            raise InvalidArgumentError(
                "Dimensions of the components do not match: "
                f"{' vs '.join(str(a.shape[0]) for a in arrs)}")
        n = n.pop()
        for lo in range(0, n, CHUNK):
            yield tuple(a[lo:lo + CHUNK] for a in arrs)


@dataclass
class Tensors(Stage):
    comps: tuple
    dtypes: tuple

    def blocks(self, env):
        yield tuple(as_component(r.get(env), d)[None] for r, d in zip(self.comps, self.dtypes))


@dataclass
class Range(Stage):
    start: Ref
    stop: Ref
    step: Ref

    def blocks(self, env):
        start, stop, step = (_count(r.get(env), "range: " + w) for r, w in
                             ((self.start, "start"), (self.stop, "stop"), (self.step, "step")))
        if step == 0:
            raise InvalidArgumentError("step must be a non-zero integer.")
        n = max(0, -(-(stop - start) // step))
        for lo in range(0, n, CHUNK):
            hi = min(n, lo + CHUNK)
            yield (np.arange(start + lo * step, start + hi * step, step, dtype=np.int64)[:hi - lo],)


@dataclass
class Zip(Stage):
    children: tuple
    widths: tuple  # components per child

    def blocks(self, env):
        gens = [c.blocks(env) for c in self.children]
        pending = [None] * len(gens)
        while True:
            for i, g in enumerate(gens):
                if pending[i] is None or len(pending[i][0]) == 0:
                    pending[i] = next(g, None)
                    if pending[i] is None:
                        return
            k = min(len(p[0]) for p in pending)
            yield tuple(c[:k] for p in pending for c in p)
            pending = [_rows(p, k, None) for p in pending]


@dataclass
class Concatenate(Stage):
    first: Stage
    second: Stage

    def blocks(self, env):
        yield from self.first.blocks(env)
        yield from self.second.blocks(env)


def _files(ref: Ref, env: Env) -> list[str]:
    files = np.asarray(ref.get(env), dtype=object).reshape(-1)
    return [f.decode() if isinstance(f, bytes) else str(f) for f in files]


def _open(url: str, compression: str):
    from fsspec.core import url_to_fs
    kind = (compression or "").upper()
    if kind not in ("", "GZIP", "ZLIB"):
        raise InvalidArgumentError(f"Unsupported compression_type: {compression!r} (\"\", "
                                   "\"GZIP\" or \"ZLIB\")")
    fs, path = url_to_fs(url)
    try:
        f = fs.open(path, "rb", compression="gzip" if kind == "GZIP" else None)
    except FileNotFoundError as e:
        raise NotFoundError(f"{url}; No such file or directory") from e
    if kind != "ZLIB":
        return f
    import io
    import zlib
    with f:  # fsspec has no zlib codec: the file is inflated whole (as storage.tfrecord)
        try:
            return io.BytesIO(zlib.decompress(f.read()))
        except zlib.error as e:
            raise DataLossError(f"TextLineDataset: corrupt ZLIB stream in {url}: {e}") from e


@dataclass
class TextLines(Stage):
    filenames: Ref
    compression: str = ""

    def blocks(self, env):
        from ...storage.errors import DataLossError as StorageDataLoss
        from ...storage.lines import DEFAULT_BLOCK_SIZE, lines_array, owned_blocks
        for url in _files(self.filenames, env):
            with _open(url, self.compression) as f:
                try:
                    for block in owned_blocks(f, 0, None, DEFAULT_BLOCK_SIZE):
                        arr = lines_array(block, url=url).to_numpy(zero_copy_only=False)
                        if len(arr):
                            yield (_obj(arr),)
                except StorageDataLoss as e:
                    raise DataLossError(f"TextLineDataset: {e}") from e


@dataclass
class TFRecords(Stage):
    filenames: Ref
    compression: str = ""

    def blocks(self, env):
        from ...storage import tfrecord
        from ...storage.errors import DataLossError as StorageDataLoss
        for url in _files(self.filenames, env):
            recs = []
            try:
                for _, rec in tfrecord.iter_tfrecords(url, self.compression or None):
                    recs.append(rec)
                    if len(recs) == 4096:
                        yield (_obj(recs),)
                        recs = []
            except FileNotFoundError as e:
                raise NotFoundError(f"{url}; No such file or directory") from e
            except StorageDataLoss as e:
                raise DataLossError(f"TFRecordDataset: {e}") from e
            if recs:
                yield (_obj(recs),)


def _calls(fn, args):
    """The elements ``fn(*args)`` yields; an exception the generator raises becomes TF's
    ``InvalidArgumentError`` with its type and message (and ends the input)."""
    try:
        it = iter(fn(*args))
    except Exception as e:
        raise InvalidArgumentError(f"{type(e).__name__}: {e}") from e
    while True:
        try:
            elem = next(it)
        except StopIteration:
            return
        except Exception as e:
            raise InvalidArgumentError(f"{type(e).__name__}: {e}") from e
        yield elem


@dataclass
class Generator(Stage):
    """``Dataset.from_generator``: each element the Python generator yields, checked against
    the declared structure, dtypes and shapes (called afresh each initialisation and epoch)."""
    fn: Any
    args: tuple  # Refs
    structure: Any
    export_refusal = ("its dataset reads a Python generator (Dataset.from_generator), which "
                      "cannot be exported: a meta graph holds no Python code")
    dtypes: tuple  # numpy dtypes
    shapes: tuple  # per component: tuple of dims or None

    def blocks(self, env):
        from .dataset_ops import _flatten_like
        args = [r.get(env) for r in self.args]
        for elem in _calls(self.fn, args):
            try:
                flat = _flatten_like(self.structure, elem)
            except (TypeError, KeyError, IndexError):
                flat = None
            if flat is None or len(flat) != len(self.dtypes):
                if env.skip_errors:
                    continue  # ignore_errors: the element is dropped, the generator goes on
                raise InvalidArgumentError(
                    "`generator` yielded an element that did not match the expected "
                    f"structure. The expected structure was {self._expected()}, but the "
                    f"yielded element was {elem!r}.")
            try:
                comps = [self._component(v, d, s) for v, d, s in
                         zip(flat, self.dtypes, self.shapes)]
            except InvalidArgumentError:
                if env.skip_errors:
                    continue  # ignore_errors: the element is dropped, the generator goes on
                raise
            yield tuple(comps)

    def _expected(self) -> str:
        """The declared element as its dtypes, nested: ``(tf.int64, tf.string)``."""
        from ..control.control_flow_ops import pack_as

        class _Name(str):
            __repr__ = str.__str__
        names = [_Name("tf.string" if d.kind == "O" else f"tf.{d.name}") for d in self.dtypes]
        return repr(pack_as(self.structure, names))

    @staticmethod
    def _component(v, d, s):
        try:
            a = as_component(v, d)
        except (TypeError, ValueError) as e:
            name = "string" if d.kind == "O" else d.name
            raise InvalidArgumentError(
                "`generator` yielded an element that could not be converted to the "
                f"expected type. The expected type was {name}, but the yielded element "
                f"was {v!r}.") from e
        if s is not None and (a.ndim != len(s) or any(
                w is not None and g != w for g, w in zip(a.shape, s))):
            raise InvalidArgumentError(
                f"`generator` yielded an element of shape {a.shape} where an element "
                f"of shape {tuple(s)} was expected.")
        return a[None]
