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


def test_read_options_are_checked_when_the_input_is_made():
    """A misspelt reader option fails at ``mr.csv(...)`` naming it (it used to be carried
    along unread, and the job split the rows at the default delimiter)."""
    with pytest.raises(tv.errors.InvalidArgumentError) as info:
        mr.csv("memory://tvm-mr-splits/none.csv", {"k": "string"}, delimeter=";")
    assert str(info.value).startswith("mr.csv: unknown read option 'delimeter' (the options "
                                      "are block_size, column_names, column_types, columns,")
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match="mr.records: read option 'record_bytes' must be a positive int, "
                             "got 0"):
        mr.records("memory://tvm-mr-splits/none.bin", 0)


def test_csv_options_travel_typed_through_the_graph_and_its_json():
    rows = [("a", 3), ("b", 5), ("a", 4), ("c", 1), ("b", 2), ("a", 10)]
    data = "k;n\n" + "".join(f"{k};{n}\n" for k, n in rows)
    fsspec.filesystem("memory").pipe("/tvm-mr-splits/d.csv", data.encode())
    job = mr.Job(input=mr.csv("memory://tvm-mr-splits/d.csv", {"k": "string", "n": "int64"},
                              split_size=12, delimiter=";"),
                 map=lambda c: mr.emit(c["k"], c["n"]), reduce="sum", num_reducers=2)
    expected = {}
    for k, n in rows:
        expected[k] = expected.get(k, 0) + n
    assert job.run().to_dict() == expected
    g = tv.Graph()
    job.build(g, 2)
    splits = [s for op in _read_ops(g) for s in op.attrs["splits"]]
    assert len(splits) > 2 and all(s.options == storage.ReadOptions.of(
        header=True, delimiter=";", column_names=["k", "n"]) for s in splits)
    wire = json.loads(json.dumps(g.as_graph_def()))
    again = [s for op in _read_ops(graph_from_dict(wire, tv.Graph())) for s in op.attrs["splits"]]
    assert again == splits and all(isinstance(s.options, storage.ReadOptions) for s in again)
    for node in wire["node"]:  # a graph whose split has a bad option is refused, named
        if node["op"] == "MRReadSplits":
            node["attr"]["splits"]["__tuple__"][0]["__split__"]["options"]["delimeter"] = ";"
    with pytest.raises(tv.errors.InvalidArgumentError, match="bad split: unknown read option "
                                                              "'delimeter'"):
        graph_from_dict(wire, tv.Graph())
