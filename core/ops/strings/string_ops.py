"""String ops (TensorFlow 1.x names). String tensors are NumPy object arrays of ``str``; every
kernel converts the flattened array to Arrow once and runs a vectorised ``pyarrow.compute``
function (RE2 regular expressions, as in TensorFlow), never a Python loop over elements.

* ``string_split(source, sep=None, skip_empty=True, delimiter=None)`` — TensorFlow returns a
  SparseTensor; tensorvm returns two dense 1-D tensors ``(tokens, row_ids)``: every token of
  every element of the 1-D ``source``, in order, and the index of the element it came from
  (TF's ``indices[:, 0]``). Each character of the delimiter splits (TF 1.x semantics; default
  " "); ``""`` splits into characters. ``strings_split(source, sep=None, maxsplit=-1)`` is
  ``tf.strings.split``'s rule: ``sep`` is a whole string, None splits on whitespace runs.
* ``string_to_hash_bucket_fast(input, num_buckets)`` — a stable 64-bit hash of the UTF-8 bytes
  (a polynomial hash over the bytes finished with the MurmurHash3 mixer), identical on every
  machine and run; it is *not* TensorFlow's FarmHash, so bucket ids differ from TF's.
* ``string_lower``/``string_upper`` (``tf.strings.lower``/``upper``: ASCII unless
  ``encoding="utf-8"``), ``string_strip``, ``string_length`` (bytes or UTF-8 characters),
  ``regex_full_match``, ``regex_replace``, ``string_join``, ``as_string``,
  ``string_to_number``.

None of them is differentiable.

>>> import tensorvm as tv
>>> tokens, rows = tv.string_split(tv.constant(["a b", "c"]))
>>> with tv.Session() as s: s.run([tokens, rows])
[array(['a', 'b', 'c'], dtype=object), array([0, 0, 1])]
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..common import broadcast_shapes

__all__ = ["string_split", "strings_split", "string_to_hash_bucket_fast",
           "string_to_hash_bucket", "string_lower", "string_upper", "string_strip",
           "string_length", "regex_full_match", "regex_replace", "string_join", "as_string",
           "string_to_number"]


# ---- helpers ---------------------------------------------------------------------------------
def _arrow(x) -> pa.Array:
    """The flattened string array as Arrow (large_string: no 2 GiB offset limit). An Arrow
    value (map-reduce graphs carry string columns as Arrow) is used as it is."""
    if isinstance(x, pa.ChunkedArray):
        x = x.combine_chunks()
    if isinstance(x, pa.Array):
        return x if pa.types.is_large_string(x.type) else x.cast(pa.large_string())
    return pa.array(np.asarray(x, dtype=object).ravel(), type=pa.large_string())


def _all_ascii(a: pa.Array) -> bool:
    """Whether every byte of the array's data buffer is ASCII (then the ASCII kernels, about
    twice as fast, give the same result as the UTF-8 ones)."""
    buf = a.buffers()[2]
    return buf is None or buf.size == 0 or int(np.frombuffer(buf, np.uint8).max()) < 128


def _out(a, x, dtype=None):
    """A kernel's Arrow result in the kind of its input ``x``: Arrow stays Arrow (1-D)."""
    if isinstance(x, (pa.Array, pa.ChunkedArray)):
        if dtype is None or dtype.is_string:
            return a
        return a.to_numpy(zero_copy_only=False).astype(dtype.np_dtype, copy=False)
    out = _numpy(a, np.shape(x))
    return out if dtype is None or dtype.is_string else out.astype(dtype.np_dtype, copy=False)


def _numpy(a, shape) -> np.ndarray:
    out = a.to_numpy(zero_copy_only=False)
    if out.dtype.kind == "U":
        out = out.astype(object)
    return out.reshape(shape)


def _string_input(op_type, t):
    if not t.dtype.is_string:
        raise InvalidArgumentError(f"{op_type} expects a string tensor, got {t.dtype.name}")


def _def_string_unary(op_type, fn, out_dtype=_dt.string):
    """An element-wise op over a string tensor: ``fn(arrow_array, **attrs) -> arrow_array``."""
    def shape_fn(inputs, attrs):
        _string_input(op_type, inputs[0])
        return [(out_dtype, inputs[0]._shape)]

    def kernel(x, **attrs):
        return _out(fn(_arrow(x), **attrs), x, out_dtype)

    register_op(op_type, shape_fn, kernel, differentiable=False, arrow=True)


def _check_regex(op_type, pattern):
    """Compile ``pattern`` with RE2 now, so a bad pattern fails when the op is built."""
    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except (pa.ArrowInvalid, pa.ArrowException) as e:
        raise InvalidArgumentError(f"{op_type}: invalid regular expression {pattern!r}: {e}") \
            from None


# ---- split -----------------------------------------------------------------------------------
def _split_shape(op_type):
    def shape_fn(inputs, attrs):
        (src,) = inputs
        _string_input(op_type, src)
        if src._shape is not None and len(src._shape) != 1:
            raise InvalidArgumentError(
                f"{op_type}: source must be a 1-D string tensor, got shape {list(src._shape)}")
        return [(_dt.string, (None,)), (_dt.int64, (None,))]
    return shape_fn


def _flatten(lists, drop_empty: bool, arrow: bool = False):
    tokens = pc.list_flatten(lists)
    rows = pc.list_parent_indices(lists)
    if drop_empty:
        keep = pc.not_equal(pc.binary_length(tokens), 0)
        if not pc.all(keep).as_py():
            tokens, rows = pc.filter(tokens, keep), pc.filter(rows, keep)
    rows = np.asarray(rows.to_numpy(zero_copy_only=False), dtype=np.int64)
    if arrow:  # Arrow in, Arrow out (see _arrow)
        return tokens, rows
    return tokens.to_numpy(zero_copy_only=False).astype(object, copy=False), rows


def _char_class(chars: str) -> str:
    return "[" + "".join("\\" + c if c in "\\]^-[" else c for c in chars) + "]"


def _string_split_kernel(source, delimiter, skip_empty):
    a, arrow = _arrow(source), isinstance(source, (pa.Array, pa.ChunkedArray))
    if delimiter == "":
        # Mark every character with a NUL, then split on the marks: one token per character.
        lists = pc.split_pattern(pc.replace_substring_regex(a, r"(?s)(.)", "\\1\x00"), "\x00")
        return _flatten(lists, True, arrow)
    if len(delimiter) == 1:
        lists = pc.split_pattern(a, delimiter)
    else:
        lists = pc.split_pattern_regex(a, _char_class(delimiter))
    return _flatten(lists, skip_empty, arrow)


def _strings_split_kernel(source, sep, maxsplit):
    a, arrow = _arrow(source), isinstance(source, (pa.Array, pa.ChunkedArray))
    ms = None if maxsplit < 0 else maxsplit
    if sep is None:
        if ms is None:  # runs of whitespace at either end give empty tokens, dropped below
            split = pc.ascii_split_whitespace if _all_ascii(a) else pc.utf8_split_whitespace
            return _flatten(split(a), True, arrow)
        return _flatten(pc.utf8_split_whitespace(pc.utf8_trim_whitespace(a), max_splits=ms),
                        True, arrow)
    return _flatten(pc.split_pattern(a, sep, max_splits=ms), False, arrow)


register_op("StringSplit", _split_shape("StringSplit"), _string_split_kernel,
            differentiable=False, arrow=True)
register_op("StringSplitV2", _split_shape("StringSplitV2"), _strings_split_kernel,
            differentiable=False, arrow=True)


def string_split(source, sep=None, skip_empty=True, delimiter=None, name=None):
    """Split each element of the 1-D ``source``; returns ``(tokens, row_ids)`` (see module doc).

    Every character of ``delimiter`` (alias ``sep``; default " ") is a split point; empty tokens
    are dropped when ``skip_empty``.
    """
    if sep is not None and delimiter is not None and sep != delimiter:
        raise InvalidArgumentError("string_split: give only one of sep and delimiter")
    d = delimiter if delimiter is not None else (sep if sep is not None else " ")
    return apply_op("StringSplit", [_str_tensor(source)],
                    {"delimiter": str(d), "skip_empty": bool(skip_empty)},
                    name=name).outputs


def strings_split(source, sep=None, maxsplit=-1, name=None):
    """``tf.strings.split``'s rule: ``sep`` a whole string (empty tokens kept), or None to split
    on runs of whitespace; at most ``maxsplit`` splits per element. Returns
    ``(tokens, row_ids)``."""
    if sep == "":
        raise InvalidArgumentError("strings_split: sep must not be empty (use None)")
    return apply_op("StringSplitV2", [_str_tensor(source)],
                    {"sep": sep, "maxsplit": int(maxsplit)}, name=name).outputs


# ---- hashing ---------------------------------------------------------------------------------
_P = np.uint64(0x100000001B3)  # the FNV-64 prime: an odd multiplier for the polynomial hash
_M1, _M2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


def _hash64(x) -> np.ndarray:
    """A stable 64-bit hash of each string's UTF-8 bytes: ``h = sum((b_k + 1) * P**(n-1-k))``
    mod 2**64 over the bytes, xor'd with ``(n + 1) * C``, finished with MurmurHash3's fmix64.
    Vectorised over all bytes of all strings (one ``reduceat``)."""
    a = _arrow(x)
    n = len(a)
    offsets = np.frombuffer(a.buffers()[1], dtype=np.int64)[a.offset:a.offset + n + 1]
    base = int(offsets[0]) if n else 0
    starts, ends = offsets[:-1] - base, offsets[1:] - base
    lengths = (ends - starts).astype(np.int64)
    total = int(lengths.sum())
    h = np.zeros(n, dtype=np.uint64)
    if total:
        data = np.frombuffer(a.buffers()[2], dtype=np.uint8)[base:base + total]
        powers = np.cumprod(np.concatenate([[np.uint64(1)],
                                            np.full(int(lengths.max()) - 1, _P)]),
                            dtype=np.uint64)
        owner_end = np.repeat(ends, lengths)
        expo = owner_end - 1 - np.arange(total)
        contrib = (data.astype(np.uint64) + np.uint64(1)) * powers[expo]
        nonempty = lengths > 0
        h[nonempty] = np.add.reduceat(contrib, starts[nonempty], dtype=np.uint64)
    h ^= (lengths.astype(np.uint64) + np.uint64(1)) * _M2
    h ^= h >> _S33
    h *= _M1
    h ^= h >> _S33
    h *= _M2
    h ^= h >> _S33
    return h if isinstance(x, (pa.Array, pa.ChunkedArray)) else h.reshape(np.shape(x))


def _hash_bucket_shape(inputs, attrs):
    _string_input("StringToHashBucketFast", inputs[0])
    if attrs["num_buckets"] < 1:
        raise InvalidArgumentError(f"StringToHashBucketFast: num_buckets must be >= 1, got "
                                   f"{attrs['num_buckets']}")
    return [(_dt.int64, inputs[0]._shape)]


register_op("StringToHashBucketFast", _hash_bucket_shape,
            lambda input, num_buckets: (_hash64(input) % np.uint64(num_buckets)).astype(np.int64),
            differentiable=False, arrow=True)


def string_to_hash_bucket_fast(input, num_buckets, name=None):
    """Each string's stable 64-bit hash modulo ``num_buckets`` (int64, same shape)."""
    return apply_op("StringToHashBucketFast", [_str_tensor(input)],
                    {"num_buckets": int(num_buckets)}, name=name).outputs[0]


def string_to_hash_bucket(string_tensor, num_buckets, name=None):
    """TF 1.x's older name; the same hash as :func:`string_to_hash_bucket_fast` here."""
    return string_to_hash_bucket_fast(string_tensor, num_buckets, name=name)


# ---- element-wise ----------------------------------------------------------------------------
_def_string_unary("StringLower", lambda a, encoding: (pc.utf8_lower if encoding else
                                                      pc.ascii_lower)(a))
_def_string_unary("StringUpper", lambda a, encoding: (pc.utf8_upper if encoding else
                                                      pc.ascii_upper)(a))
_def_string_unary("StringStrip", pc.ascii_trim_whitespace)
_def_string_unary("StringLength", lambda a, unit: (pc.utf8_length(a) if unit == "UTF8_CHAR"
                                                   else pc.binary_length(a)), _dt.int32)
_def_string_unary("RegexFullMatch",
                  lambda a, pattern: pc.match_substring_regex(a, rf"\A(?:{pattern})\z"),
                  _dt.bool_)
_def_string_unary("RegexReplace",
                  lambda a, pattern, rewrite, replace_global: pc.replace_substring_regex(
                      a, pattern, rewrite, max_replacements=None if replace_global else 1))


def _str_tensor(x):
    """A tensor as is (its dtype checked by the op); a Python/NumPy value as a string constant."""
    if isinstance(x, Tensor) or hasattr(x, "_as_graph_element"):
        return convert_to_tensor(x)
    return convert_to_tensor(x, dtype=_dt.string)


def _unary(op_type, input, attrs, name):
    return apply_op(op_type, [_str_tensor(input)], attrs, name=name).outputs[0]


def _encoding(encoding):
    e = (encoding or "").lower().replace("_", "-")
    if e not in ("", "utf-8", "utf8"):
        raise InvalidArgumentError(f"unsupported encoding {encoding!r} (use '' or 'utf-8')")
    return "utf-8" if e else ""


def string_lower(input, encoding="", name=None):
    """``tf.strings.lower``: ASCII letters only, or all of Unicode with ``encoding="utf-8"``."""
    return _unary("StringLower", input, {"encoding": _encoding(encoding)}, name)


def string_upper(input, encoding="", name=None):
    """``tf.strings.upper``: ASCII letters only, or all of Unicode with ``encoding="utf-8"``."""
    return _unary("StringUpper", input, {"encoding": _encoding(encoding)}, name)


def string_strip(input, name=None):
    """Strip leading and trailing ASCII whitespace."""
    return _unary("StringStrip", input, {}, name)


def string_length(input, name=None, unit="BYTE"):
    """Length of each string in bytes (``unit="BYTE"``) or characters (``"UTF8_CHAR"``), int32."""
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise InvalidArgumentError(f"StringLength: unit must be 'BYTE' or 'UTF8_CHAR', got "
                                   f"{unit!r}")
    return _unary("StringLength", input, {"unit": unit}, name)


def regex_full_match(input, pattern, name=None):
    """Whether each whole string matches the RE2 ``pattern`` (bool, same shape)."""
    _check_regex("RegexFullMatch", pattern)
    return _unary("RegexFullMatch", input, {"pattern": str(pattern)}, name)


def regex_replace(input, pattern, rewrite, replace_global=True, name=None):
    """Replace matches of the RE2 ``pattern`` by ``rewrite`` (``\\1`` names a group); only the
    first match per element unless ``replace_global``."""
    _check_regex("RegexReplace", pattern)
    return _unary("RegexReplace", input, {"pattern": str(pattern), "rewrite": str(rewrite),
                                          "replace_global": bool(replace_global)}, name)


# ---- join ------------------------------------------------------------------------------------
def _join_shape(inputs, attrs):
    if not inputs:
        raise InvalidArgumentError("StringJoin needs at least one input")
    shp = ()
    for t in inputs:
        _string_input("StringJoin", t)
        shp = broadcast_shapes(shp, t._shape)
    return [(_dt.string, shp)]


def _join_kernel(*inputs, separator):
    shape = np.broadcast_shapes(*[np.shape(x) for x in inputs])
    arrays = [_arrow(np.broadcast_to(np.asarray(x, dtype=object), shape)) for x in inputs]
    sep = pa.scalar(separator, pa.large_string())
    return _numpy(pc.binary_join_element_wise(*arrays, sep), shape)


register_op("StringJoin", _join_shape, _join_kernel, differentiable=False)


def string_join(inputs, separator="", name=None):
    """Element-wise concatenation of the string tensors ``inputs`` (broadcast), separated by
    ``separator``."""
    ts = [_str_tensor(x) for x in inputs]
    return apply_op("StringJoin", ts, {"separator": str(separator)}, name=name).outputs[0]


# ---- numbers <-> strings ---------------------------------------------------------------------
def _as_string_shape(inputs, attrs):
    x = inputs[0]
    if x.dtype.is_string or x.dtype.is_complex:
        raise InvalidArgumentError(f"AsString: unsupported input dtype {x.dtype.name}")
    return [(_dt.string, x._shape)]


def _as_string_kernel(input, fmt):
    x = np.asarray(input)
    if x.dtype.kind == "b":
        out = np.where(x, "true", "false")
    else:
        out = np.char.mod(fmt, x) if x.size else np.empty(x.shape, dtype="U1")
    return out.astype(object)


register_op("AsString", _as_string_shape, _as_string_kernel, differentiable=False)


def as_string(input, precision=-1, scientific=False, shortest=False, width=-1, fill="",
              name=None):
    """Numbers to strings, printf-style as in TF: floats as ``%f`` (6 decimals unless
    ``precision``), ``%e`` with ``scientific``, ``%g`` with ``shortest``; ``width`` pads with
    spaces, or zeros with ``fill="0"``; bools as "true"/"false"."""
    x = convert_to_tensor(input)
    if scientific and shortest:
        raise InvalidArgumentError("AsString: cannot select both scientific and shortest")
    if fill not in ("", " ", "0"):
        raise InvalidArgumentError(f"AsString: fill must be '', ' ' or '0', got {fill!r}")
    flags = "0" if fill == "0" else ""
    w = str(int(width)) if width > -1 else ""
    if x.dtype.is_floating:
        prec = f".{int(precision)}" if precision > -1 else ""
        fmt = f"%{flags}{w}{prec}{'e' if scientific else 'g' if shortest else 'f'}"
    else:
        if precision > -1 or scientific or shortest:
            raise InvalidArgumentError(
                "AsString: precision, scientific and shortest apply to floats only")
        fmt = f"%{flags}{w}d"
    return apply_op("AsString", [x], {"fmt": fmt}, name=name).outputs[0]


def _to_number_shape(inputs, attrs):
    _string_input("StringToNumber", inputs[0])
    if attrs["out_type"] not in (_dt.float32, _dt.float64, _dt.int32, _dt.int64):
        raise InvalidArgumentError(f"StringToNumber: out_type must be float32, float64, int32 "
                                   f"or int64, got {attrs['out_type'].name}")
    return [(attrs["out_type"], inputs[0]._shape)]


def _to_number_kernel(string_tensor, out_type):
    a = pc.ascii_trim_whitespace(_arrow(string_tensor))
    try:
        out = pc.cast(a, pa.from_numpy_dtype(out_type.np_dtype))
    except (pa.ArrowInvalid, pa.ArrowException) as e:
        raise InvalidArgumentError(f"StringToNumberOp could not correctly convert string: "
                                   f"{e}") from None
    return np.asarray(out.to_numpy(zero_copy_only=False),
                      dtype=out_type.np_dtype).reshape(np.shape(string_tensor))


register_op("StringToNumber", _to_number_shape, _to_number_kernel, differentiable=False)


def string_to_number(string_tensor, out_type=_dt.float32, name=None):
    """Parse each string as a number of ``out_type``; an unparsable string fails at run time."""
    return apply_op("StringToNumber", [_str_tensor(string_tensor)],
                    {"out_type": _dt.as_dtype(out_type)},
                    name=name).outputs[0]
