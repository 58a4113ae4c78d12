"""Input splits and readers: every format against a direct pyarrow/NumPy read, on every store,
plus a property test of the line-ownership rule."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import uuid

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorvm.storage import DataLossError, Split, read, splits


def _lines_of(data: bytes) -> list[bytes]:
    """Reference: lines end at \\n (one \\r before it dropped) or at EOF."""
    if not data:
        return []
    parts = data.split(b"\n")
    out = [p[:-1] if p.endswith(b"\r") else p for p in parts[:-1]]
    return out + [parts[-1]] if parts[-1] else out


def _read_all(parts, **kw):
    return [batch for s in parts for batch in read(s, **kw)]


def _text_lines(parts, **kw) -> list:
    return [x for batch in _read_all(parts, **kw) for x in batch.to_pylist()]


# -- the line-ownership rule, as a property ---------------------------------------------------
_PROP_ROOT = f"tvmtest-prop-{uuid.uuid4().hex}"
_LINE = st.text(alphabet=st.sampled_from(list("ab ,\ré€𝄞")), max_size=12)


@st.composite
def _texts(draw) -> bytes:
    lines = draw(st.lists(st.tuples(_LINE, st.sampled_from(["\n", "\r\n"])), max_size=25))
    text = "".join(line + sep for line, sep in lines)
    if draw(st.booleans()):
        text += draw(_LINE)  # no final newline
    return text.encode()


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)
@given(data=_texts(), split_size=st.integers(1, 48), block_size=st.integers(1, 40))
def test_split_lines_are_the_file_lines_once_in_order(data, split_size, block_size):
    fs = fsspec.filesystem("memory")
    fs.pipe(f"/{_PROP_ROOT}/f.txt", data)
    try:
        parts = splits(f"memory://{_PROP_ROOT}/f.txt", split_size=split_size,
                       block_size=block_size, encoding=None)
        assert [(s.start, s.end) for s in parts] == [
            (lo, min(lo + split_size, len(data))) for lo in range(0, len(data), split_size)]
        expected = _lines_of(data)
        assert _text_lines(parts) == expected
        utf8 = [Split.from_dict(dict(s.to_dict(), options={"block_size": block_size}))
                for s in parts]
        assert _text_lines(utf8) == [x.decode() for x in expected]
    finally:
        fs.rm(f"/{_PROP_ROOT}", recursive=True)


# -- each format against a direct read --------------------------------------------------------
def _text_file(n=3000, seed=0) -> bytes:
    rng = np.random.default_rng(seed)
    words = ["alpha", "βeta", "", "gamma 𝄞", "delta,epsilon", "\r"]
    lines = [" ".join(rng.choice(words, rng.integers(0, 6))) for _ in range(n)]
    return ("\n".join(lines) + "\n").encode()


def test_text_matches_pyarrow(store):
    data = _text_file()
    store.pipe("in", "a.txt", data)
    store.pipe("in", "b.txt", b"x\r\ny")
    parts = splits(store.url("in", "*.txt"), split_size=997, storage_options=store.options)
    assert len(parts) > 10 and parts[-1].url.endswith("b.txt")
    direct = pa.py_buffer(data).to_pybytes().decode().split("\n")[:-1]
    direct = [x[:-1] if x.endswith("\r") else x for x in direct]
    got = _text_lines(parts, storage_options=store.options)
    assert got == direct + ["x", "y"]
    batches = _read_all(parts[:1], batch_size=7, storage_options=store.options)
    assert max(len(b) for b in batches) == 7 and all(b.type == pa.string() for b in batches)


def test_jsonl_matches_pyarrow(store):
    rows = [{"id": i, "name": f"n{i}é", "score": i / 7} for i in range(2000)]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    store.pipe("in", "r.jsonl", data)
    parts = splits(store.url("in", "r.jsonl"), format="jsonl", split_size=4096,
                   storage_options=store.options)
    got = pa.Table.from_batches(_read_all(parts, storage_options=store.options))
    assert len(parts) > 5 and got.equals(pa_json.read_json(io.BytesIO(data)))


def test_csv_matches_pyarrow(store):
    table = pa.table({"k": np.arange(3000), "v": np.linspace(0, 1, 3000),
                      "s": [f"w{i % 17}" for i in range(3000)]})
    buf = io.BytesIO()
    pa_csv.write_csv(table, buf)
    store.pipe("in", "t.csv", buf.getvalue())
    parts = splits(store.url("in", "t.csv"), format="csv", split_size=5000,
                   column_types={"k": "int64", "v": "double", "s": "string"},
                   storage_options=store.options)
    assert len(parts) > 5 and parts[3].options.column_names == ("k", "v", "s")
    got = pa.Table.from_batches(_read_all(parts, storage_options=store.options))
    assert got.equals(pa_csv.read_csv(io.BytesIO(buf.getvalue())))


def test_parquet_by_row_groups_matches_pyarrow(store):
    table = pa.table({"a": np.arange(5000), "b": np.arange(5000) * 0.5})
    with store.open_write("in", "p.parquet") as f:
        pq.write_table(table, f, row_group_size=500)
    parts = splits(store.url("in", "p.parquet"), format=None, split_size=10_000,
                   storage_options=store.options)
    assert parts[0].format == "parquet" and len(parts) > 1
    assert sorted(g for s in parts for g in s.row_groups) == list(range(10))
    got = pa.Table.from_batches(_read_all(parts, batch_size=300, storage_options=store.options))
    assert got.equals(table)
    cols = splits(store.url("in", "p.parquet"), format="parquet", columns=["b"],
                  storage_options=store.options)
    assert _read_all(cols, storage_options=store.options)[0].schema.names == ["b"]


def test_arrow_ipc_by_record_batches_matches_pyarrow(store):
    table = pa.table({"x": np.arange(4000, dtype=np.int32), "y": [str(i) for i in range(4000)]})
    with store.open_write("in", "t.arrow") as f:
        with pa.ipc.new_file(f, table.schema) as w:
            for batch in table.to_batches(max_chunksize=400):
                w.write_batch(batch)
    parts = splits(store.url("in", "t.arrow"), format="arrow", split_size=8000,
                   storage_options=store.options)
    assert len(parts) > 1
    got = pa.Table.from_batches(_read_all(parts, storage_options=store.options))
    assert got.equals(table)


def test_npy_by_rows_matches_numpy(store):
    arr = np.random.default_rng(0).standard_normal((1000, 3, 2)).astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, arr)
    store.pipe("in", "x.npy", buf.getvalue())
    parts = splits(store.url("in", "x.npy"), format="npy", split_size=2400,
                   storage_options=store.options)
    assert len(parts) == 10 and (parts[1].row_start, parts[1].row_end) == (100, 200)
    got = np.concatenate(_read_all(parts, batch_size=33, storage_options=store.options))
    np.testing.assert_array_equal(got, np.lib.format.read_array(io.BytesIO(buf.getvalue()),
                                                                allow_pickle=False))


def test_fixed_records_aligned_to_record_boundaries(store):
    raw = np.random.default_rng(0).integers(0, 256, 100 * 777, dtype=np.uint8).tobytes()
    store.pipe("in", "r.bin", raw)
    parts = splits(store.url("in", "r.bin"), format="fixed", record_bytes=100,
                   split_size=4096, storage_options=store.options)
    assert all(s.start % 100 == 0 and s.end % 100 == 0 for s in parts) and len(parts) == 20
    batches = _read_all(parts, batch_size=13, storage_options=store.options)
    assert all(b.dtype == np.uint8 and b.shape[1] == 100 and len(b) <= 13 for b in batches)
    np.testing.assert_array_equal(np.concatenate(batches),
                                  np.frombuffer(raw, np.uint8).reshape(-1, 100))


def test_compressed_files_are_one_split_each(store):
    data = _text_file(500, seed=1)
    store.pipe("in", "a.txt.gz", gzip.compress(data))
    store.pipe("in", "b.txt.bz2", bz2.compress(data))
    rec = np.arange(300, dtype=np.uint8).tobytes()
    store.pipe("fx", "r.bin.gz", gzip.compress(rec))
    parts = splits([store.url("in", "a.txt.gz"), store.url("in", "b.txt.bz2")], split_size=100,
                   storage_options=store.options)
    assert [(s.compression, s.start, s.end) for s in parts] == [("gzip", 0, None),
                                                                 ("bz2", 0, None)]
    want = [x.decode() for x in _lines_of(data)]
    assert _text_lines(parts, storage_options=store.options) == want + want
    fixed = splits(store.url("fx"), format="fixed", record_bytes=30,
                   storage_options=store.options)
    assert np.concatenate(_read_all(fixed, storage_options=store.options)).shape == (10, 30)


def test_folder_input_skips_markers_and_empty_files(store):
    store.pipe("out", "part-0.txt", b"a\nb\n")
    store.pipe("out", "part-1.txt", b"")
    store.pipe("out", "_SUCCESS", b"{}")
    parts = splits(store.url("out"), storage_options=store.options)
    assert len(parts) == 1 and parts[0].url.endswith("part-0.txt")
    with pytest.raises(FileNotFoundError, match="nothing"):
        splits(store.url("nothing", "*.txt"), storage_options=store.options)


def test_bad_input_is_data_loss_naming_url(store):
    store.pipe("bad", "r.bin", b"x" * 250)
    with pytest.raises(DataLossError, match="multiple of record_bytes") as info:
        splits(store.url("bad", "r.bin"), format="fixed", record_bytes=100,
               storage_options=store.options)
    assert info.value.url == store.url("bad", "r.bin")
    store.pipe("bad", "u.txt", b"ok\n\xff\xfe\n")
    (split,) = splits(store.url("bad", "u.txt"), storage_options=store.options)
    with pytest.raises(DataLossError, match="UTF-8") as info:
        list(read(split, storage_options=store.options))
    assert info.value.url == store.url("bad", "u.txt")
    raw = [b.to_pylist() for b in read(split.__class__.from_dict(dict(
        split.to_dict(), options={"encoding": None})), storage_options=store.options)]
    assert raw == [[b"ok", b"\xff\xfe"]]
    store.pipe("bad", "j.jsonl", b'{"a": 1}\n{"a": \n')
    (split,) = splits(store.url("bad", "j.jsonl"), format="jsonl", storage_options=store.options)
    with pytest.raises(DataLossError, match="JSON"):
        list(read(split, storage_options=store.options))


def test_object_npy_is_refused_never_unpickled(mem_root):
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    fsspec.filesystem("memory").pipe(mem_root[len("memory://"):] + "/o.npy", buf.getvalue())
    with pytest.raises(ValueError, match="pickle"):
        splits(f"{mem_root}/o.npy", format="npy")


def test_split_is_plain_data_with_stable_id(mem_root):
    fsspec.filesystem("memory").pipe(mem_root[len("memory://"):] + "/a.csv", b"x,y\n1,2\n3,4\n")
    parts = splits(f"{mem_root}/a.csv", format="csv", split_size=5, delimiter=",")
    wire = json.loads(json.dumps([s.to_dict() for s in parts]))
    again = [Split.from_dict(d) for d in wire]
    assert again == parts and [s.id for s in again] == [s.id for s in parts]
    assert len({s.id for s in parts}) == len(parts) and parts[0].id.endswith("@csv[0:5]")
    assert hash(parts[0]) == hash(again[0])
    rows = pa.Table.from_batches([b for s in wire for b in read(s)])
    assert rows.to_pydict() == {"x": [1, 3], "y": [2, 4]}
    with pytest.raises(ValueError, match="unknown input format"):
        splits(f"{mem_root}/a.csv", format="nope")


def test_npy_fortran_scalar_and_compressed_are_one_split(mem_root):
    fs = fsspec.filesystem("memory")
    root = mem_root[len("memory://"):]
    arrays = {"f.npy": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
              "s.npy": np.array(5, np.int8), "c.npy.gz": np.arange(10, dtype=np.int32)}
    for name, arr in arrays.items():
        buf = io.BytesIO()
        np.save(buf, arr)
        fs.pipe(f"{root}/{name}", gzip.compress(buf.getvalue()) if name.endswith(".gz")
                else buf.getvalue())
    for name, arr in arrays.items():
        parts = splits(f"{mem_root}/{name}", format="npy", split_size=8)
        assert len(parts) == 1, name
        got = np.concatenate([np.atleast_1d(b) for b in read(parts[0], batch_size=3)])
        np.testing.assert_array_equal(got.reshape(arr.shape), arr)


# -- compressed input: linear time, bounded memory, corruption named ---------------------------
def _time_read(url, **kw) -> float:
    import time
    t0 = time.perf_counter()
    n = sum(len(b) for s in splits(url, **kw) for b in read(s))
    assert n > 0
    return time.perf_counter() - t0


def test_one_long_line_in_gzip_reads_in_linear_time(mem_root):
    fs = fsspec.filesystem("memory")
    size = 24 << 20
    root = mem_root[len("memory://"):]
    fs.pipe(f"{root}/long.txt.gz", gzip.compress(b"x" * size + b"\n", 1))
    fs.pipe(f"{root}/short.txt.gz", gzip.compress(b"x" * 1023 + b"\n" * (size // 1024), 1))
    # the same bytes as one line and as 24 Ki short lines, read in 16 KiB chunks: a reader
    # that re-copies the pending line per chunk is quadratic (1536 chunks of a 24 MiB line)
    long = min(_time_read(f"{mem_root}/long.txt.gz", block_size=16 << 10) for _ in range(2))
    short = min(_time_read(f"{mem_root}/short.txt.gz", block_size=16 << 10) for _ in range(2))
    assert long < 4 * short + 0.5, (long, short)
    lines = [x for s in splits(f"{mem_root}/long.txt.gz", block_size=1 << 20)
             for b in read(s, batch_size=1) for x in b.to_pylist()]
    assert lines == ["x" * size]


def test_gzip_bomb_is_streamed_in_bounded_memory(mem_root):
    import tracemalloc
    fs = fsspec.filesystem("memory")
    fs.pipe(f"{mem_root[len('memory://'):]}/bomb.txt.gz",
            gzip.compress((b"0" * 99 + b"\n") * (2 << 20), 9))  # 200 MiB of records
    tracemalloc.start()
    try:
        rows = sum(len(b) for s in splits(f"{mem_root}/bomb.txt.gz")
                   for b in read(s, batch_size=1 << 16))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rows == 2 << 20 and peak < 48 << 20


@pytest.mark.parametrize("damage", ["truncated", "flipped", "not-gzip"])
@pytest.mark.parametrize("codec", ["gz", "bz2"])
def test_corrupt_compressed_input_is_data_loss_naming_the_url(store, damage, codec):
    data = b"".join(b"line %d\n" % i for i in range(20000))
    raw = bytearray(gzip.compress(data) if codec == "gz" else bz2.compress(data))
    if damage == "truncated":
        raw = raw[: len(raw) // 2]
    elif damage == "flipped":
        raw[len(raw) // 2] ^= 0xFF
    else:
        raw = bytearray(b"plain text, not compressed\n" * 10)
    store.pipe("in", f"f.txt.{codec}", bytes(raw))
    url = store.url("in", f"f.txt.{codec}")
    with pytest.raises(DataLossError, match="corrupt or truncated") as info:
        for s in splits(url, storage_options=store.options):
            for _ in read(s, storage_options=store.options):
                pass
    assert info.value.url == url


def test_a_split_dict_with_missing_or_unknown_keys_is_named():
    """``read({"url": ...})`` raised a bare TypeError about __init__'s arguments."""
    with pytest.raises(ValueError, match=r"a split needs 'format' \(a dict from Split.to_dict\(\)"
                                         r" has url, format, start, end"):
        next(read({"url": "memory://x.txt"}))
    d = Split("memory://x.txt", "text").to_dict()
    with pytest.raises(ValueError, match=r"unknown key 'colour' in a split"):
        Split.from_dict({**d, "colour": "red"})
    assert Split.from_dict(d) == Split("memory://x.txt", "text")
