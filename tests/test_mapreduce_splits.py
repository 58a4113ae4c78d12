"""Map-reduce input splits travel through the graph as typed values (``storage.Split``), and
the one line-ownership rule (``storage.lines.first_line_start``) decides where lines begin."""
import io
import json

import fsspec
import pytest

import tensorvm as tv
import tensorvm.mapreduce as mr
from tensorvm import storage
from tensorvm.framework.graph_def import graph_from_dict
from tensorvm.storage.lines import first_line_start, owned_blocks


def _job(url):
    return mr.Job(input=mr.text(url, split_size=4), num_reducers=2,
                  map=lambda lines: mr.emit(tv.strings.split(lines), 1))


def _read_ops(graph):
    return [op for op in graph.get_operations() if op.type == "MRReadSplits"]


def test_read_op_holds_split_values():
    fsspec.filesystem("memory").pipe("/tvm-mr-splits/a.txt", b"a b\nc a\nb b\n")
    g = tv.Graph()
    _job("memory://tvm-mr-splits/a.txt").build(g, 2)
    splits = [s for op in _read_ops(g) for s in op.attrs["splits"]]
    assert splits and all(isinstance(s, storage.Split) for s in splits)
    assert sorted(s.start for s in splits) == [0, 4, 8]


def test_graph_with_splits_round_trips_through_json():
    fsspec.filesystem("memory").pipe("/tvm-mr-splits/b.txt", b"x y\ny z\n")
    g = tv.Graph()
    _job("memory://tvm-mr-splits/b.txt").build(g, 2)
    text = json.dumps(g.as_graph_def())
    g2 = graph_from_dict(json.loads(text), tv.Graph())
    assert [op.attrs["splits"] for op in _read_ops(g2)] == \
        [op.attrs["splits"] for op in _read_ops(g)]


@pytest.mark.parametrize("data", [b"", b"\n", b"ab", b"ab\ncd\n", b"\n\nab\r\ncd", b"a\nbc\n\nd"])
def test_first_line_start_agrees_with_owned_blocks(data):
    for start in range(len(data) + 2):
        owned = b"".join(owned_blocks(io.BytesIO(data), start, len(data) + 1, 3))
        first = first_line_start(io.BytesIO(data), start)
        assert data[first:].startswith(owned) and (owned or first >= len(data) or start > len(data))


def test_bad_record_offset_in_a_later_split():
    """The byte offset a bad record is named by counts from the split's first owned line."""
    fsspec.filesystem("memory").pipe("/tvm-mr-splits/c.jsonl",
                                     b'{"n": 1}\n{"n": 2}\n{"n": 3}\nnot json\n{"n": 5}\n')
    job = mr.Job(input=mr.jsonl("memory://tvm-mr-splits/c.jsonl", {"n": "int64"},
                                split_size=20),
                 map=lambda c: mr.emit(c["n"], 1), num_reducers=1)
    with pytest.raises(tv.errors.DataLossError, match="at byte offset 27 "):
        job.run()
