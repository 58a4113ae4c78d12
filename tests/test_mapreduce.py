"""tensorvm.mapreduce in process: word count against a single-process reference (generated
Zipf text and a real corpus), committed output, counters, user counters and reduce functions,
bad records, the plan."""
import collections
import os
import re

import fsspec
import numpy as np
import pytest

import tensorvm as tv
import tensorvm.mapreduce as mr
from tensorvm.jobs.wordcount import wordcount, wordcount_job


def zipf_lines(n_lines, seed=0, vocab=2000):
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(vocab)], dtype=object)
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    lens = rng.integers(4, 21, n_lines)
    toks = words[rng.choice(vocab, int(lens.sum()), p=p)]
    cuts = np.cumsum(lens)[:-1]
    return [" ".join(chunk) for chunk in np.split(toks, cuts)]


@pytest.fixture
def zipf_dir(tmp_path):
    lines = zipf_lines(3000)
    for f in range(4):
        (tmp_path / f"part-{f}.txt").write_text("\n".join(lines[f::4]) + "\n")
    return tmp_path, collections.Counter(w for line in lines for w in line.split())


def read_text_output(url):
    fs, path = fsspec.core.url_to_fs(url)
    assert fs.exists(f"{path}/_SUCCESS")
    out = {}
    for p in sorted(fs.glob(f"{path}/part-r-*")):
        for line in fs.cat(p).decode().splitlines():
            k, v = line.split("\t")
            assert k not in out  # a key lives in one reducer's file, once
            out[k] = v
    return out


def test_wordcount_zipf_equals_reference_and_is_committed(zipf_dir):
    d, expected = zipf_dir
    out = (d / "out").as_uri()
    res = wordcount(f"{d.as_uri()}/*.txt", out, num_reducers=3, split_size=4096)
    got = read_text_output(out)
    assert {k: int(v) for k, v in got.items()} == dict(expected)
    c = res.counters
    assert c["map_input_records"] == 3000 and c["bad_records"] == 0
    assert c["reduce_output_records"] == len(expected)
    assert len(res.output_urls) == 3 and res.num_map_tasks == 2
    with pytest.raises(FileExistsError):  # a committed output is never overwritten silently
        wordcount(f"{d.as_uri()}/*.txt", out)
    wordcount(f"{d.as_uri()}/*.txt", out, overwrite=True)


def test_wordcount_on_python_sources_equals_reference(tmp_path):
    src = os.path.dirname(collections.__file__)  # the collections package: real text
    files = sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".py"))
    expected = collections.Counter()
    for f in files:
        # Arrow splits on Unicode White_Space; str.split() also on the ASCII separators 0x1c-0x1f
        expected.update(w for w in re.split(r"[ \t\n\r\x0b\x0c\x85\xa0\u1680\u2000-\u200a"
                                            r"\u2028\u2029\u202f\u205f\u3000]+",
                                            open(f, encoding="utf-8").read()) if w)
    res = wordcount([f"file://{f}" for f in files], num_reducers=2, split_size=8192)
    assert res.to_dict() == dict(expected)


def test_map_tasks_and_reducers_are_any_number(zipf_dir):
    d, expected = zipf_dir
    job = wordcount_job(f"{d.as_uri()}/*.txt", num_reducers=5, split_size=2048, map_tasks=7)
    res = job.run()
    assert res.to_dict() == dict(expected) and res.num_map_tasks == 7


def test_user_counters_and_a_reduce_function(zipf_dir):
    d, expected = zipf_dir

    def map_fn(lines):
        words, _ = tv.strings.split(lines)
        mr.counter("lines").add(tv.size(lines))
        return mr.emit(words, tv.constant(1, tv.int64))

    def reduce_fn(keys, values):  # keys arrive grouped: a tensor-op reducer
        uniq, idx = tv.unique(keys)
        return mr.emit(uniq, tv.unsorted_segment_sum(values, idx, tv.size(uniq)))

    res = mr.Job(mr.text(f"{d.as_uri()}/*.txt"), map=map_fn, reduce=reduce_fn,
                 num_reducers=2).run()
    assert res.to_dict() == dict(expected)
    assert res.counters["lines"] == 3000


def test_min_max_mean_first_collect():
    fs = fsspec.filesystem("memory")
    fs.pipe("/tvm-test-mr-agg/a.txt", b"a 1\nb 5\na 3\nb 2\nc 7\n")
    url = "memory://tvm-test-mr-agg/a.txt"

    def kv(lines):
        parts, _ = tv.strings.split(lines)
        return mr.emit(parts[::2], tv.strings.to_number(parts[1::2], tv.int64))

    want = {"min": {"a": 1, "b": 2, "c": 7}, "max": {"a": 3, "b": 5, "c": 7},
            "mean": {"a": 2.0, "b": 3.5, "c": 7.0}, "count": {"a": 2, "b": 2, "c": 1},
            "sum": {"a": 4, "b": 7, "c": 7}}
    for how, expected in want.items():
        assert mr.Job(mr.text(url), kv, reduce=how).run().to_dict() == expected, how
    res = mr.Job(mr.text(url), kv, reduce="collect", num_reducers=1).run()
    assert {k: sorted(v) for k, v in res.to_dict().items()} == {"a": [1, 3], "b": [2, 5],
                                                                "c": [7]}


def test_bad_records_are_skipped_and_counted_or_named(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"good line\nbad \xff\xfe line\nanother good one\n")
    job = wordcount_job(p.as_uri())
    with pytest.raises(tv.errors.DataLossError, match=r"bad\.txt at byte offset 14"):
        job.run()
    job = mr.Job(mr.text(p.as_uri()), lambda lines: mr.emit(tv.strings.split(lines), 1),
                 combine="sum", skip_bad_records=5)
    res = job.run()
    assert res.counters["bad_records"] == 1 and res.counters["map_input_records"] == 2
    assert res.to_dict() == {"good": 2, "line": 1, "another": 1, "one": 1}


_JSONL = (b'{"k": "a", "v": 1}\n'  # offset 0
          b'not json\n'  # 19: not JSON
          b'{"k": "a", "v": 2}\n'  # 28
          b'{"k": "b"}\n'  # 47: no field v
          b'{"k": "b", "v": 2.5}\n'  # 58: not an int64
          b'{"k": "c", "v": 4}\n')


def _jsonl_job(url, skip):
    return mr.Job(mr.jsonl(url, {"k": tv.string, "v": tv.int64}),
                  lambda c: mr.emit(c["k"], c["v"]), reduce="sum", skip_bad_records=skip)


def test_bad_jsonl_records_are_skipped_one_by_one_or_named():
    """One bad line is one bad record (it dropped its whole block, good lines with it), and a
    missing or ill-typed field is a bad record too (a missing int64 became INT64_MIN)."""
    fs = fsspec.filesystem("memory")
    fs.pipe("/tvm-test-mr-badjson/a.jsonl", _JSONL)
    url = "memory://tvm-test-mr-badjson/a.jsonl"
    with pytest.raises(tv.errors.DataLossError,
                       match=r"a\.jsonl at byte offset 19 .*: not a JSON object"):
        _jsonl_job(url, 0).run()
    res = _jsonl_job(url, 5).run()
    assert res.to_dict() == {"a": 3, "c": 4}
    assert res.counters["bad_records"] == 3 and res.counters["map_input_records"] == 3
    with pytest.raises(tv.errors.DataLossError, match=r"a\.jsonl at byte offset 58 .*"
                                                      r"field 'v' is 2\.5, not an int64"):
        _jsonl_job(url, 2).run()  # the third bad record is one too many


def test_a_missing_field_in_valid_json_is_a_bad_record_not_int64_min():
    fs = fsspec.filesystem("memory")
    fs.pipe("/tvm-test-mr-nullfield/a.jsonl", b'{"k": "a", "v": 1}\n{"k": "b"}\n')
    url = "memory://tvm-test-mr-nullfield/a.jsonl"
    with pytest.raises(tv.errors.DataLossError,
                       match=r"a\.jsonl at byte offset 19 .*: no field 'v'"):
        _jsonl_job(url, 0).run()
    res = _jsonl_job(url, 1).run()
    assert res.to_dict() == {"a": 1} and res.counters["bad_records"] == 1


def test_an_empty_csv_field_of_a_number_column_is_a_bad_record(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(b"k,v\na,1\nb,\nc,3\n")
    ragged = tmp_path / "r.csv"
    ragged.write_bytes(b"k,v\na,1\nb,2,3\nc,3\n")

    def job(skip):
        return mr.Job(mr.csv(p.as_uri(), {"k": tv.string, "v": tv.int64}),
                      lambda c: mr.emit(c["k"], c["v"]), reduce="sum", skip_bad_records=skip)
    with pytest.raises(tv.errors.DataLossError, match=r"t\.csv at byte offset 8 .*no field 'v'"):
        job(0).run()
    res = job(1).run()
    assert res.to_dict() == {"a": 1, "c": 3} and res.counters["bad_records"] == 1
    ragged_job = mr.Job(mr.csv(ragged.as_uri(), {"k": tv.string, "v": tv.int64}),
                        lambda c: mr.emit(c["k"], c["v"]), reduce="sum")
    with pytest.raises(tv.errors.DataLossError,
                       match=r"r\.csv at byte offset 8 .*3 fields, the header names 2"):
        ragged_job.run()


def test_csv_columns_are_read_as_declared(tmp_path):
    """A string column of digits keeps its text (it was read as int64: '007' became 7)."""
    p = tmp_path / "z.csv"
    p.write_bytes(b"zip,n\n007,1\n010,2\n007,5\n")
    res = mr.Job(mr.csv(p.as_uri(), {"zip": tv.string, "n": tv.int64}),
                 lambda c: mr.emit(c["zip"], c["n"]), reduce="sum").run()
    assert res.to_dict() == {"007": 6, "010": 2}


def test_npy_rows_of_another_dtype_fail_unless_the_cast_is_lossless(tmp_path):
    """A float64 file read as int32 was truncated silently; int32 read as int64 is lossless."""
    np.save(tmp_path / "f.npy", np.array([[1.5, 2.0], [3.0, 4.0]]))
    np.save(tmp_path / "i.npy", np.array([[1, 2], [3, 4]], np.int32))

    def total(name, dtype):
        return mr.Job(mr.npy((tmp_path / name).as_uri(), dtype, shape=(None, 2)),
                      lambda rows: mr.emit(rows[:, 0], rows[:, 1]),
                      reduce="sum").run().to_dict()
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"f\.npy holds float64 rows, the job reads int32: declare "
                             r"mr\.npy\(\.\.\., tv\.float64\)"):
        total("f.npy", tv.int32)
    assert total("i.npy", tv.int64) == {1: 2, 3: 4}


def test_plan_has_a_send_recv_per_bucket(zipf_dir):
    d, _ = zipf_dir
    plan = wordcount_job(f"{d.as_uri()}/*.txt", num_reducers=2).plan(num_workers=2)
    text = str(plan)
    # each map and reduce task a floating device of its own (issue 23)
    assert "task:*map1/device:CPU:0" in text and "task:*reduce1/device:CPU:0" in text
    assert "8 sends" in text  # 2 maps x 2 reducers x (keys, values): every bucket crosses


def test_bad_job_arguments_fail_at_construction():
    with pytest.raises(tv.errors.InvalidArgumentError, match="unknown reduce"):
        mr.Job(mr.text("memory://x"), lambda x: x, reduce="median")
    with pytest.raises(tv.errors.InvalidArgumentError, match="not associative"):
        mr.Job(mr.text("memory://x"), lambda x: x, combine="mean")
    with pytest.raises(tv.errors.FailedPreconditionError):
        mr.counter("x").add(1)


def test_shuffle_through_storage_is_exact(zipf_dir, tmp_path):
    d, expected = zipf_dir
    src = f"{d.as_uri()}/*.txt"
    job = wordcount_job(src, num_reducers=3, split_size=4096)
    job.spill_bytes, job.scratch = 0, (tmp_path / "scratch").as_uri()  # every bucket spills
    res = job.run()
    assert res.to_dict() == dict(expected)
    assert not list((tmp_path / "scratch").glob("*"))  # the shuffle files are removed
    out = (tmp_path / "wc").as_uri()
    job = wordcount_job(src, out, num_reducers=2, split_size=4096)
    job.spill_bytes = 0  # under the output's _temporary, removed by the commit
    job.run()
    assert {k: int(v) for k, v in read_text_output(out).items()} == dict(expected)
    assert not (tmp_path / "wc" / "_temporary").exists()


def test_spilled_values_of_any_shape_round_trip(tmp_path):
    from tensorvm.ops.mapreduce import mapreduce_ops as mro
    cases = [(np.arange(5), np.ones((5, 3, 2), np.float32)),
             (np.zeros((4, 10), np.uint8), np.arange(40, dtype=np.uint8).reshape(4, 10)),
             (mro.as_arrow(np.array(["a", "b"], dtype=object)), np.int64(1)),
             (np.arange(0), np.zeros((0, 2)))]
    for i, (k, v) in enumerate(cases):
        b = mro.spill(k, v, f"{tmp_path.as_uri()}/b{i}.arrow")
        k2, v2 = mro.unspill(b)
        assert mro.to_numpy(k2).tolist() == mro.to_numpy(k).tolist()
        assert np.asarray(v2).dtype == np.asarray(v).dtype
        assert np.array_equal(np.asarray(v2), np.asarray(v))


def test_speculative_job_in_process_is_exact(zipf_dir, tmp_path):
    d, expected = zipf_dir
    job = wordcount_job(f"{d.as_uri()}/*.txt", num_reducers=2, split_size=4096, map_tasks=4)
    job.speculative, job.scratch = True, (tmp_path / "scratch").as_uri()
    res = job.run()
    assert res.to_dict() == dict(expected)
    assert res.counters["map_input_records"] == 3000
    out = (tmp_path / "out").as_uri()
    job = wordcount_job(f"{d.as_uri()}/*.txt", out, num_reducers=2, split_size=4096)
    job.speculative, job.scratch = True, (tmp_path / "scratch").as_uri()
    job.run()
    assert {k: int(v) for k, v in read_text_output(out).items()} == dict(expected)


def test_backup_policy_decisions():
    from tensorvm.mapreduce.speculate import BackupPolicy
    p = BackupPolicy(factor=1.5)
    devs = ["/d0", "/d1"]
    running = {1: [("/d1", 0.0)], 3: [("/d1", 0.0)]}
    assert p.decide(running, [], devs, 10.0) == []  # nothing finished: no median yet
    assert p.decide(running, [1.0], devs, 1.0) == []  # not slow yet (1.5 x median)
    assert p.decide(running, [1.0], devs, 2.0) == [(1, "/d0")]  # one idle device, one backup
    running[1].append(("/d0", 2.0))
    assert p.decide(running, [1.0], devs, 3.0) == []  # /d0 busy with the backup
    del running[1]
    assert p.decide(running, [1.0, 1.0], devs, 4.0) == [(3, "/d0")]
    running[3].append(("/d0", 4.0))
    assert p.decide(running, [1.0, 1.0], devs, 9.0) == []  # at most one backup per task


def test_a_numpy_map_through_py_map(zipf_dir):
    d, expected = zipf_dir

    def first_words(lines):  # plain Python over the whole batch
        return [line.split()[0] for line in lines], np.ones(len(lines), np.int64)

    res = mr.Job(mr.text(f"{d.as_uri()}/*.txt"), mr.py_map(first_words, tv.string, tv.int64),
                 combine="sum", reduce="sum").run()
    lines = [line for f in sorted(d.glob("*.txt")) for line in f.read_text().splitlines()]
    assert res.to_dict() == dict(collections.Counter(line.split()[0] for line in lines))


def test_parquet_and_csv_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng = np.random.default_rng(2)
    k = rng.choice(["x", "y", "z"], 500)
    v = rng.integers(0, 100, 500)
    pq.write_table(pa.table({"k": k, "v": v}), tmp_path / "t.parquet", row_group_size=100)
    (tmp_path / "t.csv").write_text("k,v\n" + "".join(f"{a},{b}\n" for a, b in zip(k, v)))
    want = {s: int(v[k == s].sum()) for s in "xyz"}
    for inp in (mr.parquet((tmp_path / "t.parquet").as_uri(), {"k": tv.string, "v": tv.int64}),
                mr.csv((tmp_path / "t.csv").as_uri(), {"k": tv.string, "v": tv.int64},
                       split_size=1000, header=True)):
        res = mr.Job(inp, lambda c: mr.emit(c["k"], c["v"]), combine="sum").run()
        assert res.to_dict() == want


def test_counters_and_function_combiners_in_a_phased_job(zipf_dir):
    d, expected = zipf_dir

    def combine(keys, values):
        mr.counter("combined").add(tv.size(keys))
        uniq, idx = tv.unique(keys)
        return mr.emit(uniq, tv.unsorted_segment_sum(values, idx, tv.size(uniq)))

    def reduce(keys, values):
        mr.counter("reduced").add(1)
        uniq, idx = tv.unique(keys)
        return mr.emit(uniq, tv.unsorted_segment_sum(values, idx, tv.size(uniq)))

    for shuffle in ("memory", "storage"):
        res = mr.Job(mr.text(f"{d.as_uri()}/*.txt", split_size=8192),
                     lambda lines: mr.emit(tv.strings.split(lines), tv.constant(1, tv.int64)),
                     combine=combine, reduce=reduce, num_reducers=3, shuffle=shuffle).run()
        assert res.to_dict() == dict(expected), shuffle
        assert res.counters["combined"] == sum(expected.values())
        assert res.counters["reduced"] == 3


def test_failing_records_are_skipped_in_skipping_mode_or_named(tmp_path):
    lines = [f"w{i % 7} x{i}" for i in range(300)]
    lines[41] = "POISON a"
    lines[250] = "POISON b"
    text = "\n".join(lines) + "\n"
    (tmp_path / "in.txt").write_text(text)

    def first_word(batch):  # a parser that cannot take some records
        if any(line.startswith("POISON") for line in batch):
            raise ValueError("unparsable record")
        return [line.split()[0] for line in batch], np.ones(len(batch), np.int64)

    def job(skip):
        return mr.Job(mr.text((tmp_path / "in.txt").as_uri(), split_size=1024),
                      mr.py_map(first_word, tv.string, tv.int64), combine="sum",
                      skip_bad_records=skip)
    with pytest.raises(tv.errors.InvalidArgumentError, match=r"in map task \d+ reading .*in\.txt"):
        job(0).run()
    res = job(5).run()
    good = [line for line in lines if not line.startswith("POISON")]
    assert res.to_dict() == dict(collections.Counter(line.split()[0] for line in good))
    assert res.counters["bad_records"] == 2
    offsets = sorted(int(s.rsplit("@", 1)[1]) for s in res.skipped)
    assert offsets == [text.index("POISON a"), text.index("POISON b")]
