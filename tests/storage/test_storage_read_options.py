"""A split's read options are one typed, frozen value (``storage.ReadOptions``): plain data
that round-trips through JSON, and a bad option fails where the options are made, naming it."""

from __future__ import annotations

import dataclasses
import json

import fsspec
import pytest

from tensorvm import storage
from tensorvm.storage import ReadOptions, Split, read, splits
from tensorvm.storage.splits import InputFormat, _unregister_format


@pytest.mark.parametrize("options, message", [
    ({"delimeter": ";"}, "unknown read option 'delimeter' (the options are block_size, "
                         "column_names, column_types, columns, compression_type, delimiter, "
                         "encoding, header, record_bytes)"),
    ({"record_bytes": 0}, "read option 'record_bytes' must be a positive int, got 0"),
    ({"record_bytes": "100"}, "read option 'record_bytes' must be a positive int, got '100'"),
    ({"record_bytes": True}, "read option 'record_bytes' must be a positive int, got True"),
    ({"block_size": -1}, "read option 'block_size' must be a positive int, got -1"),
    ({"delimiter": ";;"}, "read option 'delimiter' must be one character, got ';;'"),
    ({"encoding": "latin-1"}, "read option 'encoding' must be 'utf-8' or None (bytes), got "
                              "'latin-1'"),
    ({"header": "yes"}, "read option 'header' must be True or False, got 'yes'"),
    ({"column_names": "k,v"}, "read option 'column_names' must be a list of column names "
                              "(str), got 'k,v'"),
    ({"columns": [1, 2]}, "read option 'columns' must be a list of column names (str), got "
                          "[1, 2]"),
    ({"column_types": {"n": "integer"}}, "read option 'column_types': column 'n' has type "
                                         "'integer', which is not an Arrow type name"),
    ({"column_types": ["int64"]}, "read option 'column_types' must map column names to Arrow "
                                  "type names"),
    ({"compression_type": "BZIP2"}, "read option 'compression_type' must be '', 'GZIP' or "
                                    "'ZLIB', got 'BZIP2'"),
])
def test_a_bad_option_fails_when_the_options_are_made(options, message):
    with pytest.raises(ValueError) as info:
        ReadOptions.of(**options)
    assert type(info.value) is ValueError and str(info.value).startswith(message)
    # splits() refuses it before it touches any file (the URL does not exist)
    with pytest.raises(ValueError) as info:
        splits("memory://tvm-read-options-nowhere/*.txt", **options)
    assert str(info.value).startswith(message)


def test_options_are_frozen_hashable_plain_data():
    a = ReadOptions.of(header=True, column_names=["k", "v"], column_types={"v": "int64",
                                                                           "k": "string"})
    b = ReadOptions(header=True, column_names=("k", "v"),
                    column_types=(("k", "string"), ("v", "int64")))
    assert a == b and hash(a) == hash(b)  # lists and dicts kept as (sorted) tuples
    assert a.column_names == ("k", "v") and dict(a.column_types) == {"k": "string", "v": "int64"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.header = False

    def plain(v):
        return v is None or isinstance(v, (str, int, float, bool)) or \
            (isinstance(v, tuple) and all(plain(x) for x in v))
    assert all(plain(getattr(a, f.name)) for f in dataclasses.fields(a))
    d = a.to_dict()  # only what differs from the defaults, as JSON values
    assert d == {"header": True, "column_names": ["k", "v"],
                 "column_types": {"k": "string", "v": "int64"}}
    assert ReadOptions.from_dict(json.loads(json.dumps(d))) == a
    assert ReadOptions().to_dict() == {} and a.replace(header=None) == \
        ReadOptions.of(column_names=["k", "v"], column_types={"k": "string", "v": "int64"})


def test_split_options_round_trip_and_the_older_form_is_read():
    fs = fsspec.filesystem("memory")
    fs.pipe("/tvm-read-options/a.csv", b"k;v\na;1\nb;2\n")
    (part,) = splits("memory://tvm-read-options/a.csv", format="csv", delimiter=";",
                     column_types={"v": "int64"})
    assert isinstance(part.options, ReadOptions)
    assert part.options == ReadOptions.of(header=True, delimiter=";", column_names=["k", "v"],
                                          column_types={"v": "int64"})
    wire = json.loads(json.dumps(part.to_dict()))
    assert wire["options"] == {"header": True, "delimiter": ";", "column_names": ["k", "v"],
                               "column_types": {"v": "int64"}}
    assert Split.from_dict(wire) == part and hash(Split.from_dict(wire)) == hash(part)
    # a split written before the options were typed: the options as JSON text
    older = {k: v for k, v in wire.items() if k != "options"}
    older["options_json"] = json.dumps(wire["options"], sort_keys=True)
    assert Split.from_dict(older) == part
    assert [b.to_pydict() for b in read(older)] == [{"k": ["a", "b"], "v": [1, 2]}]
    with pytest.raises(ValueError, match="a split has both options and options_json"):
        Split.from_dict(dict(older, options={}))
    with pytest.raises(ValueError, match="unknown read option 'delimeter'"):
        Split.from_dict(dict(wire, options={"delimeter": ";"}))
    with pytest.raises(ValueError, match="a split's options are a ReadOptions, got 'header'"):
        Split("memory://tvm-read-options/a.csv", "csv", options="header")
    assert part.with_options(encoding=None).options.encoding is None
    with pytest.raises(ValueError, match="read option 'delimiter' must be one character"):
        part.with_options(delimiter="")


def test_a_registered_format_declares_its_own_options():
    class Every(InputFormat):
        """Every ``step``-th line (an option of its own)."""
        name, extensions, option_names = "every-nth-test", (), ("step",)

        def read(self, split, f, batch_size, url):
            lines = f.read().decode().splitlines()
            yield lines[::split.options.get("step", 1)]

    fsspec.filesystem("memory").pipe("/tvm-read-options/n.txt", b"a\nb\nc\nd\ne\n")
    storage.register_format(Every())
    try:
        (part,) = splits("memory://tvm-read-options/n.txt", format="every-nth-test", step=2)
        assert part.options.extra == (("step", 2),) and part.options.to_dict() == {"step": 2}
        assert list(read(Split.from_dict(json.loads(json.dumps(part.to_dict()))))) == \
            [["a", "c", "e"]]
        with pytest.raises(ValueError, match="unknown read option 'stride'"):
            splits("memory://tvm-read-options/n.txt", format="every-nth-test", stride=2)
        with pytest.raises(ValueError, match="read option 'step' must be a string, number, "
                                             "bool, None or a list of those, got {}"):
            ReadOptions.of(step={})
    finally:
        _unregister_format("every-nth-test")
    with pytest.raises(ValueError, match="unknown read option 'step'"):
        ReadOptions.of(step=2)  # no registered format declares it now


def test_a_format_cannot_declare_a_field_of_read_options():
    class Clash(InputFormat):
        name, option_names = "clash-test", ("header",)

        def read(self, split, f, batch_size, url):
            yield []

    with pytest.raises(ValueError, match="input format 'clash-test' declares option 'header', "
                                         "a field of ReadOptions"):
        storage.register_format(Clash())
    assert "clash-test" not in storage.input_formats()
