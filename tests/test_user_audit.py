"""A newcomer's audit of the map-reduce API: odd arguments and inputs give a result or a clear
error by class and message, never a silently short result or an AttributeError."""
import fsspec
import numpy as np
import pytest

import tensorvm as tv
import tensorvm.mapreduce as mr


@pytest.fixture
def lines_url():
    fsspec.filesystem("memory").pipe("/tvm-audit/a.txt", "a b\nb c\nc\n".encode())
    return "memory://tvm-audit/a.txt"


def _count(url, **kw):
    return mr.Job(mr.text(url), lambda lines: mr.emit(tv.strings.split(lines), 1),
                  combine="sum", reduce="sum", **kw)


@pytest.mark.parametrize("value", [0, -1, 2.5, "2", True])
def test_bad_map_tasks_fail_at_construction_not_with_an_empty_result(lines_url, value):
    """map_tasks=-1 used to read no split at all and return an empty result; 2.5 and "2"
    were taken as they came."""
    with pytest.raises(tv.errors.InvalidArgumentError, match="map_tasks must be"):
        _count(lines_url, map_tasks=value)


@pytest.mark.parametrize("value", ["2", 2.5, True, 0, -1])
def test_bad_num_reducers_fail_by_class_and_message(lines_url, value):
    """num_reducers="2" raised TypeError('<' not supported...), 2.5 became 2 silently.
    (None is the default now: the count sized to the data, issue 23.)"""
    with pytest.raises(tv.errors.InvalidArgumentError, match="num_reducers must be"):
        _count(lines_url, num_reducers=value)


def test_numpy_integer_counts_are_accepted(lines_url):
    res = _count(lines_url, num_reducers=np.int64(3), map_tasks=np.int32(2)).run()
    assert res.to_dict() == {"a": 1, "b": 2, "c": 2} and res.num_reducers == 3


def test_to_dict_of_a_job_with_output_says_where_the_output_is(lines_url):
    """An output job's Result.to_dict() raised AttributeError: 'NoneType' ... 'ndim'."""
    out = "memory://tvm-audit/out-to-dict"
    res = _count(lines_url, output=mr.text_output(out, overwrite=True)).run()
    with pytest.raises(tv.errors.FailedPreconditionError, match="tvm-audit/out-to-dict"):
        res.to_dict()


def test_py_map_keys_of_mixed_types_are_named(lines_url):
    """A py_map declaring string keys that returns an int among them failed deep in the
    partition op with pyarrow's 'Expected bytes, got a 'int' object'."""
    fn = mr.py_map(lambda lines: (["x", 1, "y"][:len(lines)], [1] * len(lines)),
                   tv.string, tv.int64)
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"py_map.*key 1 .*int.*string"):
        mr.Job(mr.text(lines_url), fn, reduce="sum").run()


def test_py_map_unicode_and_bytes_keys_still_work(lines_url):
    fn = mr.py_map(lambda lines: ([s + "é" for s in lines], [1] * len(lines)),
                   tv.string, tv.int64)
    res = mr.Job(mr.text(lines_url), fn, reduce="sum").run()
    assert res.to_dict() == {"a bé": 1, "b cé": 1, "cé": 1}


def test_verify_names_a_missing_data_file_once(tmp_path):
    """A checkpoint whose one data file is gone was reported once per tensor in it."""
    from tensorvm import storage
    d = tmp_path.as_uri()
    c = storage.checkpoint_url(d, "model", 1)
    entries = storage.write_shard(c, 0, 1, {"a": np.ones(3), "b": np.zeros(2), "c": np.ones(1)})
    storage.commit(d, c, entries, step=1)
    data = [p for p in (tmp_path / "model-1").rglob("data-*")]
    assert len(data) == 1
    data[0].unlink()
    problems = storage.verify_checkpoint(c)
    assert len(problems) == 1 and "data file missing" in problems[0], problems


def test_a_split_whose_file_vanished_names_its_url():
    """It raised FileNotFoundError('/tvm-audit-gone/b.txt'): the path without its scheme."""
    from tensorvm import storage
    fs = fsspec.filesystem("memory")
    fs.pipe("/tvm-audit-gone/b.txt", b"q\n")
    (split,) = storage.splits("memory://tvm-audit-gone/b.txt")
    fs.rm("/tvm-audit-gone/b.txt")
    with pytest.raises(FileNotFoundError, match=r"memory://tvm-audit-gone/b\.txt"):
        list(storage.read(split))
