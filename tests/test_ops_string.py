"""String ops (pyarrow compute kernels) against plain-Python references, with edge cases
(empty strings, empty tensors, scalars, non-ASCII text) and the bad inputs they reject."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tensorvm as tv
from tests.opcheck import run

TEXT = np.array(["Hello World", "a,b,,c", "", "  two  spaces ", "Ünï cödé", "x"], dtype=object)


def feed_run(build, value):
    """Build on a string placeholder of ``value``'s shape and run with it fed."""
    g = tv.Graph()
    with g.as_default():
        ph = tv.placeholder(tv.string, np.shape(value))
        out = build(ph)
        with tv.Session(graph=g) as s:
            return s.run(out, {ph: value})


def split_ref(values, chars, skip_empty):
    tokens, rows = [], []
    for i, v in enumerate(values):
        parts = re.split("[" + re.escape(chars) + "]", v) if chars else list(v)
        for p in parts:
            if p or not skip_empty:
                tokens.append(p)
                rows.append(i)
    return tokens, rows


@pytest.mark.parametrize("delimiter,skip_empty", [(" ", True), (" ", False), (", ", True),
                                                  (",", False), ("", True), ("]^-\\", True)])
def test_string_split(delimiter, skip_empty):
    values = np.append(TEXT, "a]b^c-d\\e")
    tokens, rows = feed_run(lambda t: tv.string_split(t, delimiter=delimiter,
                                                      skip_empty=skip_empty), values)
    want_t, want_r = split_ref(values, delimiter, skip_empty)
    assert tokens.dtype == object and list(tokens) == want_t
    assert rows.dtype == np.int64 and list(rows) == want_r


def test_string_split_default_and_empty_input():
    tokens, rows = run(list(tv.string_split(["a b", "c"])))
    assert list(tokens) == ["a", "b", "c"] and list(rows) == [0, 0, 1]
    tokens, rows = feed_run(lambda t: tv.string_split(t), np.array([], dtype=object))
    assert tokens.shape == (0,) and rows.shape == (0,)
    t = tv.string_split(tv.constant(["x y"]))[0]
    assert t.dtype == tv.string and t.shape.as_list() == [None]


@pytest.mark.parametrize("sep,maxsplit", [(None, -1), (",", -1), (",", 1), (" ", -1)])
def test_strings_split(sep, maxsplit):
    tokens, rows = feed_run(lambda t: tv.strings_split(t, sep=sep, maxsplit=maxsplit), TEXT)
    want_t, want_r = [], []
    for i, v in enumerate(TEXT):
        parts = v.split(sep, maxsplit)
        want_t += parts
        want_r += [i] * len(parts)
    assert list(tokens) == want_t and list(rows) == want_r


def test_split_errors():
    with pytest.raises(tv.errors.InvalidArgumentError, match="StringSplit.*1-D"):
        tv.string_split(tv.constant([["a b"]]))
    with pytest.raises(tv.errors.InvalidArgumentError, match="StringSplit expects a string"):
        tv.string_split(tv.constant([1, 2]))
    with pytest.raises(tv.errors.InvalidArgumentError, match="sep must not be empty"):
        tv.strings_split(["a"], sep="")


def test_hash_bucket_is_stable_deterministic_and_spread():
    values = np.array([f"token{i}" for i in range(2000)] + ["", "é", "token0"], dtype=object)
    a = feed_run(lambda t: tv.string_to_hash_bucket_fast(t, 64), values)
    b = feed_run(lambda t: tv.string_to_hash_bucket(t, 64), values)
    assert a.dtype == np.int64 and a.shape == values.shape
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0 and a.max() < 64
    assert a[-1] == a[0]  # equal strings, equal buckets
    counts = np.bincount(a[:2000], minlength=64)
    assert counts.min() > 10 and counts.max() < 60  # roughly uniform (mean 31)
    # Fixed values: the hash must not change between runs, machines or versions.
    fixed = run(tv.string_to_hash_bucket_fast(["hello", "world", "", "tensorvm"], 1000))
    np.testing.assert_array_equal(fixed, FIXED_BUCKETS)
    # 2-D input and a prefix that must not collide with its extension.
    grid = run(tv.string_to_hash_bucket_fast([["ab", "abc"], ["a\x00", "a"]], 2 ** 62))
    assert grid.shape == (2, 2) and len(set(grid.ravel())) == 4


FIXED_BUCKETS = [558, 688, 337, 683]


def hash_ref(s: str) -> int:
    """The documented hash, one string at a time in plain Python (Horner's rule)."""
    mask, p = 2 ** 64 - 1, 0x100000001B3
    m1, m2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
    data = s.encode()
    h = 0
    for b in data:
        h = (h * p + b + 1) & mask
    h ^= ((len(data) + 1) * m2) & mask
    h ^= h >> 33
    h = (h * m1) & mask
    h ^= h >> 33
    h = (h * m2) & mask
    return h ^ (h >> 33)


def test_hash_matches_the_documented_reference():
    values = list(TEXT) + ["a" * 300, "\x00", "日本語"]
    got = run(tv.string_to_hash_bucket_fast(np.array(values, dtype=object), 2 ** 63 - 1))
    assert [int(v) for v in got] == [hash_ref(v) % (2 ** 63 - 1) for v in values]


def test_hash_bucket_errors():
    with pytest.raises(tv.errors.InvalidArgumentError, match="StringToHashBucketFast"):
        tv.string_to_hash_bucket_fast(tv.constant(["a"]), 0)
    with pytest.raises(tv.errors.InvalidArgumentError, match="expects a string"):
        tv.string_to_hash_bucket_fast(tv.constant([1.0]), 10)


@pytest.mark.parametrize("shape", [(6,), (2, 3), ()])
def test_lower_upper_strip_length(shape):
    values = TEXT.reshape(shape) if shape else np.array("MiXed Ünï ", dtype=object)
    lower, upper, ulower, strip, nbytes, nchars = feed_run(lambda t: [
        tv.string_lower(t), tv.string_upper(t), tv.string_lower(t, encoding="utf-8"),
        tv.string_strip(t), tv.string_length(t), tv.string_length(t, unit="UTF8_CHAR")],
        values)
    ascii_lower = np.vectorize(lambda s: "".join(c.lower() if c.isascii() else c for c in s),
                               otypes=[object])
    ascii_upper = np.vectorize(lambda s: "".join(c.upper() if c.isascii() else c for c in s),
                               otypes=[object])
    np.testing.assert_array_equal(lower, ascii_lower(values))
    np.testing.assert_array_equal(upper, ascii_upper(values))
    np.testing.assert_array_equal(ulower, np.vectorize(str.lower, otypes=[object])(values))
    np.testing.assert_array_equal(strip, np.vectorize(str.strip, otypes=[object])(values))
    np.testing.assert_array_equal(nbytes, np.vectorize(lambda s: len(s.encode()))(values))
    np.testing.assert_array_equal(nchars, np.vectorize(len)(values))
    assert np.shape(lower) == values.shape and nbytes.dtype == np.int32


def test_regex_full_match_and_replace():
    values = TEXT
    m = feed_run(lambda t: tv.regex_full_match(t, r"[a-z,]*"), values)
    np.testing.assert_array_equal(m, [bool(re.fullmatch(r"[a-z,]*", v)) for v in values])
    # A match of a prefix is not a full match; "$" must not match before a final newline.
    got = run(tv.regex_full_match(["abc", "abcd", "abc\n"], "abc|abcd"))
    np.testing.assert_array_equal(got, [True, True, False])
    rep = feed_run(lambda t: [tv.regex_replace(t, r"(\w)(\w)", r"\2\1"),
                              tv.regex_replace(t, "[ ,]+", "_", replace_global=False)], values)
    np.testing.assert_array_equal(rep[0], [re.sub(r"([A-Za-z0-9_])([A-Za-z0-9_])", r"\2\1", v)
                                           for v in values])
    np.testing.assert_array_equal(rep[1], [re.sub("[ ,]+", "_", v, count=1) for v in values])
    with pytest.raises(tv.errors.InvalidArgumentError, match="RegexFullMatch.*regular expr"):
        tv.regex_full_match(tv.constant(["a"]), "(unclosed")
    with pytest.raises(tv.errors.InvalidArgumentError, match="RegexReplace.*regular expr"):
        tv.regex_replace(tv.constant(["a"]), "[z-a]", "")


def test_string_join_broadcasts():
    a = np.array([["a", "b"], ["c", ""]], dtype=object)
    got = run(tv.string_join([a, "-", np.array(["x", "y"], dtype=object)], separator="|"))
    np.testing.assert_array_equal(got, [["a|-|x", "b|-|y"], ["c|-|x", "|-|y"]])
    assert run(tv.string_join([tv.constant("p"), tv.constant("q")])) == "pq"
    with pytest.raises(tv.errors.InvalidArgumentError, match="StringJoin"):
        tv.string_join([tv.constant(["a", "b"]), tv.constant(["a", "b", "c"])])
    with pytest.raises(tv.errors.InvalidArgumentError, match="StringJoin expects a string"):
        tv.string_join([tv.constant(["a"]), tv.constant([1])])


def test_as_string():
    f = np.array([1.5, -2.0, 1234567.0], np.float32)
    got = run([tv.as_string(f), tv.as_string(f, precision=2), tv.as_string(f, scientific=True),
               tv.as_string(f, shortest=True), tv.as_string(np.array([3, -4], np.int64)),
               tv.as_string(np.array([7], np.int32), width=4, fill="0"),
               tv.as_string(np.array([True, False])), tv.as_string(np.zeros((0, 2)))])
    assert list(got[0]) == ["%f" % v for v in f]
    assert list(got[1]) == ["%.2f" % v for v in f]
    assert list(got[2]) == ["%e" % v for v in f]
    assert list(got[3]) == ["%g" % v for v in f]
    assert list(got[4]) == ["3", "-4"] and list(got[5]) == ["0007"]
    assert list(got[6]) == ["true", "false"] and got[7].shape == (0, 2)
    with pytest.raises(tv.errors.InvalidArgumentError, match="AsString"):
        tv.as_string(tv.constant(["a"]))
    with pytest.raises(tv.errors.InvalidArgumentError, match="floats only"):
        tv.as_string(tv.constant([1]), precision=3)


def test_string_to_number():
    got = run([tv.string_to_number(["1.5", " -2 ", "1e3", "inf"]),
               tv.string_to_number(["12", "-7"], out_type=tv.int64),
               tv.string_to_number(np.array([], dtype=object), out_type=tv.float64)])
    np.testing.assert_array_equal(got[0], np.array([1.5, -2, 1000, np.inf], np.float32))
    assert got[0].dtype == np.float32 and got[1].dtype == np.int64
    np.testing.assert_array_equal(got[1], [12, -7])
    assert got[2].shape == (0,) and got[2].dtype == np.float64
    bad = tv.string_to_number(tv.constant(["1", "x1"]), name="parse")
    with pytest.raises(tv.errors.InvalidArgumentError, match=r"(?s)convert string.*'parse'"):
        run(bad)
    with pytest.raises(tv.errors.InvalidArgumentError, match="StringToNumber: out_type"):
        tv.string_to_number(["1"], out_type=tv.bool)


def test_string_ops_are_not_differentiable():
    g = tv.Graph()
    with g.as_default():
        x = tv.constant([1.0, 2.0])
        y = tv.string_to_number(tv.as_string(x))
        assert tv.gradients(tv.reduce_sum(y), x) == [None]


def test_strings_namespace():
    from tensorvm.ops import strings
    tokens, rows = run(list(strings.split(["a,b", "c"], sep=",")))
    assert list(tokens) == ["a", "b", "c"] and list(rows) == [0, 0, 1]
    assert strings.lower is tv.string_lower and strings.to_hash_bucket_fast is \
        tv.string_to_hash_bucket_fast


# ---- substr and reduce_join ----------------------------------------------------------------------
def test_substr_bytes_chars_negative_and_broadcast():
    words = np.array(["hello", "world", "héllo"], dtype=object)
    with tv.Session() as s:
        got = s.run([tv.substr(words, 1, 3), tv.substr(words, -2, 5),
                     tv.strings.substr(words, [0, 1, 1], [2, 2, 2], unit="UTF8_CHAR"),
                     tv.substr(words[2:], 1, 2)])
    assert got[0].tolist() == ["ell", "orl", "él"]  # bytes (TF's default unit), valid UTF-8
    assert got[1].tolist() == ["lo", "ld", "lo"]
    assert got[2].tolist() == ["he", "or", "él"]
    assert got[3].tolist() == ["é"]
    with tv.Session() as s:  # a cut inside a character leaves bytes
        assert s.run(tv.substr(["héllo"], 1, 1)).tolist() == [b"\xc3"]


def test_substr_errors():
    with tv.Session() as s:
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match="Substr: pos 5 out of range for string 'abc' at index 0"):
            s.run(tv.substr(["abc"], 5, 1))
        with pytest.raises(tv.errors.InvalidArgumentError, match="len must be non-negative"):
            s.run(tv.substr(["abc"], 0, -1))
    with pytest.raises(tv.errors.InvalidArgumentError, match="pos and len must have the same "
                                                             "shape"):
        tv.substr(["ab", "cd"], [0, 1], 1)
    with pytest.raises(tv.errors.InvalidArgumentError, match="unit must be 'BYTE' or 'UTF8_CHAR'"):
        tv.substr(["ab"], 0, 1, unit="WORD")
    with pytest.raises(tv.errors.InvalidArgumentError, match="Substr expects a string tensor"):
        tv.substr(tv.constant([1]), 0, 1)


def test_reduce_join_equals_python_joins():
    x = np.array([[["a", "b"], ["c", "d"]], [["e", "f"], ["g", "h"]]], dtype=object)
    with tv.Session() as s:
        got = s.run([tv.reduce_join(x), tv.reduce_join(x, -1, separator=","),
                     tv.strings.reduce_join(x, [0, 2], keepdims=True),
                     tv.reduce_join(np.zeros((2, 0), object), 1)])
    assert got[0] == "abcdefgh"
    assert got[1].tolist() == [[",".join(r) for r in m] for m in x.tolist()]
    want = ["".join(x[i, j, k] for i in range(2) for k in range(2)) for j in range(2)]
    assert got[2].shape == (1, 2, 1) and got[2].reshape(-1).tolist() == want
    assert got[3].tolist() == ["", ""]
    with pytest.raises(tv.errors.InvalidArgumentError, match="axis 3 is out of range"):
        tv.reduce_join(x, 3)


def test_substr_of_raw_bytes():
    blob = bytes([0xFF, 0xD8, 0xFF, 0xE0, 0x00]) + b"rest"
    with tv.Session() as s:
        got = s.run(tv.substr(tv.constant(np.array([blob], dtype=object)), 0, 3))
        assert got.tolist() == [b"\xff\xd8\xff"]
        assert s.run(tv.substr(np.array([blob], dtype=object), -4, 4)).tolist() == ["rest"]
        with pytest.raises(tv.errors.InvalidArgumentError, match="UTF8_CHAR needs valid UTF-8"):
            s.run(tv.substr(np.array([blob], dtype=object), 0, 1, unit="UTF8_CHAR"))
