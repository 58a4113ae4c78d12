"""How a split is read: the input formats' options as one typed, frozen value.

A :class:`ReadOptions` is plain data (strings, numbers, tuples), checked when it is made: a
misspelt option name or a value of the wrong kind fails there, naming the option, not later
inside a reader on some worker. It travels inside every :class:`~tensorvm.storage.Split` and
as JSON through :meth:`to_dict` / :meth:`from_dict` (the graph_def codec, a reader queue).

>>> ReadOptions.of(header=True, column_names=["k", "v"]).to_dict()
{'header': True, 'column_names': ['k', 'v']}
>>> ReadOptions.of(delimeter=";")
Traceback (most recent call last):
...
ValueError: unknown read option 'delimeter' (the options are block_size, column_names, column_types, columns, compression_type, delimiter, encoding, header, record_bytes)
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, fields
from collections.abc import Mapping
from typing import Any

__all__ = ["ReadOptions"]

# A registered format's own options, by format name (storage.splits.register_format fills it).
_FORMAT_OPTIONS: dict[str, tuple[str, ...]] = {}

_ENCODINGS = ("utf-8", "utf8", None)  # what storage.lines reads (None: bytes)
_COMPRESSION_TYPES = ("", "NONE", "GZIP", "ZLIB")  # storage.tfrecord's, upper-cased
_SCALARS = (str, int, float, bool, type(None))  # a format's own options: JSON scalars


def _positive_int(name: str, v) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
        raise ValueError(f"read option {name!r} must be a positive int, got {v!r}")
    return int(v)


def _names(name: str, v) -> tuple[str, ...] | None:
    if v is None:
        return None
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)) or \
            not all(isinstance(x, str) for x in v):
        raise ValueError(f"read option {name!r} must be a list of column names (str), "
                         f"got {v!r}")
    return tuple(v)


def _column_types(v) -> tuple[tuple[str, str], ...] | None:
    if v is None:
        return None
    pairs = v.items() if isinstance(v, Mapping) else v
    try:
        pairs = tuple((k, t) for k, t in pairs)
    except (TypeError, ValueError):
        pairs = None
    if pairs is None or isinstance(v, (str, bytes)) or \
            not all(isinstance(k, str) and isinstance(t, str) for k, t in pairs):
        raise ValueError("read option 'column_types' must map column names to Arrow type "
                         f"names ({{'n': 'int64'}}), got {v!r}")
    import pyarrow as pa
    for k, t in pairs:
        try:
            pa.type_for_alias(t)
        except ValueError:
            raise ValueError(f"read option 'column_types': column {k!r} has type {t!r}, "
                             "which is not an Arrow type name (int64, float64, string, "
                             "bool, ...)") from None
    return tuple(sorted(dict(pairs).items()))


def _extra_value(name: str, v):
    if isinstance(v, list):
        v = tuple(v)
    if not (isinstance(v, _SCALARS) or
            (isinstance(v, tuple) and all(isinstance(x, _SCALARS) for x in v))):
        raise ValueError(f"read option {name!r} must be a string, number, bool, None or a "
                         f"list of those, got {v!r}")
    return v


@dataclass(frozen=True)
class ReadOptions:
    """The options of the built-in input formats, each checked when the value is made.

    ``encoding`` (``text``): ``"utf-8"``, or ``None`` for bytes. ``block_size`` (line
    formats): bytes read at a time. ``header`` (``csv``): the first line names the columns
    (``None``: the format's default, ``True`` when :func:`~tensorvm.storage.splits` cuts a
    CSV file). ``delimiter`` (``csv``): one character. ``column_names``/``column_types``
    (``csv``): the columns' names and Arrow type names. ``columns`` (``parquet``): read only
    these. ``record_bytes`` (``fixed``): the record length. ``compression_type``
    (``tfrecord``): ``""``, ``"GZIP"`` or ``"ZLIB"``. ``extra``: options of a format
    registered by the user, by name (each declared in its ``InputFormat.option_names``).

    Make one from keyword options with :meth:`of`; list and dict values are kept as tuples,
    so equal options compare (and hash) equal.
    """

    encoding: str | None = "utf-8"
    block_size: int | None = None
    header: bool | None = None
    delimiter: str = ","
    column_names: tuple[str, ...] | None = None
    column_types: tuple[tuple[str, str], ...] | None = None
    columns: tuple[str, ...] | None = None
    record_bytes: int | None = None
    compression_type: str | None = None
    extra: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        # Normalise JSON-shaped values (lists, a dict of types) to tuples, then check each
        # field: the value is frozen and hashable, and a bad option fails here.
        norm = {
            "block_size": _positive_int("block_size", self.block_size),
            "record_bytes": _positive_int("record_bytes", self.record_bytes),
            "column_names": _names("column_names", self.column_names),
            "columns": _names("columns", self.columns),
            "column_types": _column_types(self.column_types),
            "extra": tuple(sorted((str(k), _extra_value(k, v)) for k, v in self.extra)),
        }
        for k, v in norm.items():
            object.__setattr__(self, k, v)
        if self.encoding not in _ENCODINGS:
            raise ValueError(f"read option 'encoding' must be 'utf-8' or None (bytes), got "
                             f"{self.encoding!r}")
        if self.header is not None and not isinstance(self.header, bool):
            raise ValueError(f"read option 'header' must be True or False, got "
                             f"{self.header!r}")
        if not isinstance(self.delimiter, str) or len(self.delimiter) != 1:
            raise ValueError(f"read option 'delimiter' must be one character, got "
                             f"{self.delimiter!r}")
        if self.compression_type is not None and (
                not isinstance(self.compression_type, str) or
                self.compression_type.upper() not in _COMPRESSION_TYPES):
            raise ValueError(f"read option 'compression_type' must be '', 'GZIP' or 'ZLIB', "
                             f"got {self.compression_type!r}")
        builtin = _builtin_names()
        for k, _ in self.extra:
            if k in builtin:
                raise ValueError(f"read option {k!r} is a field of ReadOptions, not an extra")

    @classmethod
    def of(cls, **options: Any) -> "ReadOptions":
        """Options from keywords (JSON values: lists and dicts allowed). A name that is no
        field is an option of a registered format that declares it
        (``InputFormat.option_names``), else ValueError naming it."""
        builtin = _builtin_names()
        own = {k: v for k, v in options.items() if k in builtin}
        rest = {k: v for k, v in options.items() if k not in builtin}
        if rest:
            declared = _declared_extra_names()
            for k in sorted(rest):
                if k not in declared:
                    raise ValueError(f"unknown read option {k!r} (the options are "
                                     f"{', '.join(sorted(builtin))})")
        return cls(**own, extra=tuple(rest.items()))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ReadOptions":
        """Inverse of :meth:`to_dict`."""
        if not isinstance(d, Mapping):
            raise ValueError(f"read options must be a dict of options, got {d!r}")
        return cls.of(**d)

    def to_dict(self) -> dict[str, Any]:
        """The options that differ from the defaults, as JSON values (lists, a dict of
        column types); ``ReadOptions.from_dict(o.to_dict()) == o``."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "extra" or v == f.default:
                continue
            if f.name == "column_types":
                v = dict(v)
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        for k, v in self.extra:
            out[k] = list(v) if isinstance(v, tuple) else v
        return out

    def replace(self, **changes: Any) -> "ReadOptions":
        """These options with some changed (names as in :meth:`of`)."""
        return self.of(**{**self.to_dict(), **changes})

    def get(self, name: str, default: Any = None) -> Any:
        """An option by name (a format's own options, ``extra``, included): what a
        user-registered format reads its options with."""
        if name in _builtin_names():
            return getattr(self, name)
        return dict(self.extra).get(name, default)


def _builtin_names() -> frozenset:
    return _BUILTIN


def declare_format_options(format_name: str, names: tuple[str, ...] | None) -> None:
    """Record the options of the input format ``format_name`` beyond ReadOptions' fields
    (``None``: the format is gone). Called by ``register_format``."""
    if names is None:
        _FORMAT_OPTIONS.pop(format_name, None)
        return
    clash = sorted(set(names) & _BUILTIN)
    if clash:
        raise ValueError(f"input format {format_name!r} declares option {clash[0]!r}, a "
                         "field of ReadOptions")
    _FORMAT_OPTIONS[format_name] = tuple(names)


def _declared_extra_names() -> set:
    return {n for names in _FORMAT_OPTIONS.values() for n in names}


_BUILTIN = frozenset(f.name for f in fields(ReadOptions) if f.name != "extra")

NO_OPTIONS = ReadOptions()
