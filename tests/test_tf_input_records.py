"""TFRecord files of tf.train.Example protos, written and read as TF 1.x programs do, and the
parsing ops (decode_csv, decode_raw, parse_single_example/parse_example), against references.

``tests/data/examples*.tfrecord`` were written by TensorFlow itself
(``tests/data/make_tf_fixtures.py``); the test reads them with tensorvm alone."""
import os
import struct

import numpy as np
import pytest
import tensorvm as tf
from tensorvm.storage import tf_protos

DATA = os.path.join(os.path.dirname(__file__), "data")


@pytest.fixture
def g():
    with tf.Graph().as_default() as graph:
        yield graph


def _example(i):
    return tf.train.Example(features=tf.train.Features(feature={
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "xy": tf.train.Feature(float_list=tf.train.FloatList(value=[i * 0.5, -i])),
        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"ex%d" % i])),
        "tags": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i % 3)))),
    }))


FEATURES = {"id": tf.FixedLenFeature([], tf.int64),
            "xy": tf.FixedLenFeature([2], tf.float32),
            "name": tf.FixedLenFeature([], tf.string),
            "tags": tf.VarLenFeature(tf.int64),
            "weight": tf.FixedLenFeature([1], tf.float32, default_value=[1.5])}


def _check_parsed(k, got, i, path):
    assert k == f"{path}:{got['_offset']}" if "_offset" in got else k.startswith(path + ":")
    assert got["id"] == i and got["id"].dtype == np.int64
    np.testing.assert_array_equal(got["xy"], np.array([i * 0.5, -i], np.float32))
    assert got["name"] == b"ex%d" % i
    idx, vals, shape = got["tags"]
    np.testing.assert_array_equal(idx, np.arange(i % 3).reshape(-1, 1))
    np.testing.assert_array_equal(vals, np.arange(i % 3))
    assert shape.tolist() == [i % 3]
    np.testing.assert_array_equal(got["weight"], [1.5])


def test_write_then_read_examples_with_parse_single_example(g, tmp_path):
    path = str(tmp_path / "train.tfrecords")
    with tf.python_io.TFRecordWriter(path) as w:
        for i in range(6):
            w.write(_example(i).SerializeToString())
    # offsets are TF's keys: every record is 16 bytes of framing + its payload
    sizes = [len(_example(i).SerializeToString()) for i in range(6)]
    offsets = np.cumsum([0] + [s + 16 for s in sizes])[:-1]
    q = tf.train.string_input_producer([path], num_epochs=1, shuffle=False)
    key, serialized = tf.TFRecordReader().read(q)
    parsed = tf.parse_single_example(serialized, FEATURES)
    with tf.Session() as s:
        for i in range(6):
            k, got = s.run([key, parsed])
            assert k == f"{path}:{offsets[i]}"
            _check_parsed(k, got, i, path)
        with pytest.raises(tf.errors.OutOfRangeError):
            s.run(key)
    assert [tf_protos.Example.FromString(r) for r in tf.python_io.tf_record_iterator(path)] \
        == [_example(i) for i in range(6)]


@pytest.mark.parametrize("name,options", [("examples.tfrecord", None),
                                          ("examples_gzip.tfrecord",
                                           tf.python_io.TFRecordOptions("GZIP"))])
def test_tensorflow_written_tfrecords_batched_through_shuffle_batch(g, name, options):
    path = os.path.join(DATA, name)
    q = tf.train.string_input_producer([path], num_epochs=2, shuffle=False)
    _, serialized = tf.TFRecordReader(options=options).read(q)
    ex = tf.parse_single_example(serialized, {k: FEATURES[k] for k in ("id", "xy", "name")})
    batch = tf.train.shuffle_batch(ex, batch_size=3, capacity=20, min_after_dequeue=2, seed=1,
                                   allow_smaller_final_batch=True)
    rows = []
    with tf.Session() as s:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(s, coord)
        try:
            while True:
                b = s.run(batch)
                rows += zip(b["id"].tolist(), map(tuple, b["xy"].tolist()), b["name"].tolist())
        except tf.errors.OutOfRangeError:
            pass
        coord.request_stop()
        coord.join(threads)
    want = [(i, (i * 0.5, -float(i)), b"ex%d" % i) for i in range(5)] * 2
    assert sorted(rows) == sorted(want)


def test_parse_example_batched_sparse_indices(g):
    blobs = [_example(i).SerializeToString() for i in range(4)]
    out = tf.parse_example(tf.constant(np.array(blobs, dtype=object)),
                           {"id": tf.FixedLenFeature([], tf.int64),
                            "tags": tf.VarLenFeature(tf.int64)})
    with tf.Session() as s:
        got = s.run(out)
    assert got["id"].tolist() == [0, 1, 2, 3]
    ref = [(i, j) for i in range(4) for j in range(i % 3)]
    assert got["tags"].indices.tolist() == [list(r) for r in ref]
    assert got["tags"].values.tolist() == [j for _, j in ref]
    assert got["tags"].dense_shape.tolist() == [4, 2]


@pytest.mark.parametrize("features,message", [
    ({"xy": tf.FixedLenFeature([3], tf.float32)},
     "Key: xy, Index: 0.  Number of float values != expected.  Values size: 2 but output "
     "shape: [3]"),
    ({"xy": tf.FixedLenFeature([2], tf.int64)},
     "Key: xy.  Data types don't match. Data type: float but expected type: int64"),
    ({"nope": tf.FixedLenFeature([2], tf.int64)},
     "Feature: nope (data type: int64) is required but could not be found."),
])
def test_parse_errors_are_tf_messages(g, features, message):
    out = tf.parse_single_example(tf.constant(_example(3).SerializeToString()), features)
    with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError) as e:
        s.run(out)
    assert message in str(e.value)


def test_parse_rejects_bytes_that_are_not_an_example(g):
    out = tf.parse_single_example(tf.constant(b"\xff\xff\xff"),
                                  {"a": tf.FixedLenFeature([], tf.int64)})
    with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError,
                                          match="Could not parse example input"):
        s.run(out)


def test_parse_spec_errors_at_graph_construction(g):
    with pytest.raises(tf.errors.InvalidArgumentError, match="int64, float32 or string"):
        tf.parse_single_example(tf.constant(b""), {"a": tf.FixedLenFeature([], tf.int32)})
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be a scalar"):
        tf.parse_single_example(tf.constant([b"", b""]), {"a": tf.VarLenFeature(tf.int64)})


def _corrupt(tmp_path, data: bytes, name="c.tfrecord"):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


@pytest.mark.parametrize("mutate,message", [
    (lambda b: b[:8] + bytes([b[8] ^ 1]) + b[9:], "corrupted record at byte 0 (length crc32c"),
    (lambda b: b[:14] + bytes([b[14] ^ 0x40]) + b[15:], "corrupted record at byte 0 (data "
                                                        "crc32c"),
    (lambda b: b[:-3], "truncated record at byte 40 (declares 0 bytes, the file has 1 after "
                       "the header)"),
    (lambda b: b + b"\x01\x02", "truncated record at byte 56 (a header needs 12 bytes, 2 left)"),
])
def test_corrupt_tfrecords_are_data_loss_naming_the_file(g, tmp_path, mutate, message):
    from tensorvm.storage.tfrecord import encode_record
    good = encode_record(b"abcd") + encode_record(b"efgh") + encode_record(b"")
    assert len(good) == 56
    path = _corrupt(tmp_path, mutate(good))
    q = tf.train.string_input_producer([path], num_epochs=1, shuffle=False)
    _, v = tf.TFRecordReader().read_up_to(q, 10)
    with tf.Session() as s, pytest.raises(tf.errors.DataLossError) as e:
        s.run(v)
    assert message in str(e.value) and path in str(e.value)
    with pytest.raises(tf.errors.DataLossError, match="c.tfrecord"):
        list(tf.python_io.tf_record_iterator(path))


def test_tfrecord_length_past_end_of_file_is_refused_before_reading(tmp_path):
    from tensorvm.storage import DataLossError
    from tensorvm.storage.tfrecord import iter_tfrecords, masked_crc32c
    head = struct.pack("<Q", 10 ** 12)
    path = _corrupt(tmp_path, head + struct.pack("<I", masked_crc32c(head)) + b"xy")
    with pytest.raises(DataLossError, match=r"declares 1000000000000 bytes, the file has 2"):
        list(iter_tfrecords(path))


# ---- decode_csv / decode_raw ------------------------------------------------------------------

def test_decode_csv_types_defaults_quotes_and_select_cols(g):
    recs = tf.constant(["1,2.5,x,9", ",,,", '7,"1e3","a,b",0'])
    a, b, c, d = tf.decode_csv(recs, [[0], [1.0], ["d"], tf.constant([5], tf.int64)])
    sel = tf.decode_csv(tf.constant(["1,2,3", "4,5,6"]), [[0], [0.0]], select_cols=[0, 2])
    semi = tf.decode_csv(tf.constant(['x;"q']), [[""], [""]], field_delim=";",
                         use_quote_delim=False)
    na = tf.decode_csv(tf.constant(["NA,3", "4,NA"]), [[-1], [-2.0]], na_value="NA")
    with tf.Session() as s:
        ra, rb, rc, rd = s.run([a, b, c, d])
        rsel, rsemi, rna = s.run(sel), s.run(semi), s.run(na)
    assert ra.tolist() == [1, 0, 7] and ra.dtype == np.int32
    assert rb.tolist() == [2.5, 1.0, 1000.0] and rb.dtype == np.float32
    assert rc.tolist() == ["x", "d", "a,b"]
    assert rd.tolist() == [9, 5, 0] and rd.dtype == np.int64
    assert rsel[0].tolist() == [1, 4] and rsel[1].tolist() == [3.0, 6.0]
    assert rsemi[0].tolist() == ["x"] and rsemi[1].tolist() == ['"q']
    assert rna[0].tolist() == [-1, 4] and rna[1].tolist() == [3.0, -2.0]


@pytest.mark.parametrize("records,defaults,message", [
    (["1,2"], [[0]], "Expect 1 fields but have 2 in record 0"),
    (["x"], [[0]], "Field 0 in record 0 is not a valid int32: x"),
    (["1", ""], [tf.constant([], tf.int32)], "Expect 1 fields but have 0 in record 1"),
    (["1,"], [[0], tf.constant([], tf.float32)], "Field 1 is required but missing in record 0"),
    (["99999999999"], [[0]], "Field 0 in record 0 is not a valid int32: 99999999999"),
])
def test_decode_csv_errors_are_tf_messages(g, records, defaults, message):
    out = tf.decode_csv(tf.constant(records), defaults)
    with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError) as e:
        s.run(out)
    assert message in str(e.value)


def test_decode_csv_rejects_bad_arguments_when_built(g):
    with pytest.raises(tf.errors.InvalidArgumentError, match="one character"):
        tf.decode_csv(tf.constant(["a"]), [[""]], field_delim=";;")
    with pytest.raises(tf.errors.InvalidArgumentError, match="records must be strings"):
        tf.decode_csv(tf.constant([1]), [[0]])


def test_decode_raw_against_numpy(g):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    blobs = np.empty((2, 3), dtype=object)
    for i in range(2):
        for j in range(3):
            blobs[i, j] = x[i, j].tobytes()
    big = tf.decode_raw(tf.constant([x[0, 0].astype(">i2").tobytes()]), tf.int16,
                        little_endian=False)
    out = tf.decode_raw(tf.constant(blobs), tf.float32)
    assert out.shape.as_list() == [2, 3, None]
    with tf.Session() as s:
        np.testing.assert_array_equal(s.run(out), x)
        np.testing.assert_array_equal(s.run(big)[0], x[0, 0].astype(np.int16))


@pytest.mark.parametrize("blobs,message", [
    ([b"\x01\x00\x02\x00", b"\x03\x00\x04"], "DecodeRaw requires input strings to all be the "
                                             "same size, but element 1 has size 3 != 4"),
    ([b"\x01\x00\x02"], "Input to DecodeRaw has length 3 that is not a multiple of 2, the "
                        "size of int16"),
])
def test_decode_raw_errors(g, blobs, message):
    out = tf.decode_raw(tf.constant(np.array(blobs, dtype=object)), tf.int16)
    with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError) as e:
        s.run(out)
    assert message in str(e.value)


def test_tf_io_spellings(g, tmp_path):
    path = str(tmp_path / "io.tfrecord")
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions("ZLIB")) as w:
        w.write(_example(2))  # a proto is serialized by the writer
    q = tf.train.string_input_producer([path], num_epochs=1)
    _, blob = tf.TFRecordReader(options=tf.io.TFRecordOptions("ZLIB")).read(q)
    out = tf.io.parse_single_example(blob, {"name": tf.io.FixedLenFeature([], tf.string),
                                            "tags": tf.io.VarLenFeature(tf.int64)})
    with tf.Session() as s:
        got = s.run(out)
    assert got["name"] == b"ex2" and got["tags"].values.tolist() == [0, 1]


def test_decode_csv_vectorised_kernel_agrees_with_the_record_by_record_one():
    """The Arrow kernel (split, casts over the whole block) gives what the record-by-record
    kernel gives, or hands the block to it (an error to report by record, a field Arrow is
    stricter about); random records mixing quotes, missing fields, na_value and odd numbers."""
    from tensorvm.ops.readers import parsing_ops as P
    rng = np.random.default_rng(0)
    ints = (["0", "-12", "7", "", "NA"], [" 3", "+4", "0x1", "1_0", "99999999999", "x"])
    floats = (["1.5", "-2e3", ".5", "nan", "inf", "", "NA"], [" 1.5", "nan(1)", "1e400", "y"])
    strs = (["a", '"b,c"', '"q""t"', "", "NA", "h i", '""', '"x\ty"', '"|"'],
            ['d"e', '"f\ng"', '"open', '"a"b', '"\r"'])

    def pick(kinds):
        good, odd = kinds
        return str(rng.choice(odd if rng.random() < 0.04 else good))
    types, defaults = ("int32", "float32", "string", "int64"), (5, -1.0, "D", 9)
    outcomes = {"fast": 0, "slow": 0, "error": 0}
    for trial in range(600):
        n = int(rng.integers(1, 6))
        picks = [(ints, floats, strs, ints)[j] for j in range(4)]
        delim = ",;\t|"[trial % 4]
        recs = np.array([delim.join(pick(p).replace(",", delim) for p in picks)
                         for _ in range(n)], dtype=object)
        if trial % 3 == 0:
            recs = recs.astype(str).astype(object)
            recs[0] = recs[0].encode()  # bytes records too
        na = "NA" if trial % 2 else ""
        args = (types, defaults, delim, trial % 5 != 4, na, None)
        fast = P._decode_csv_fast(recs, *args)
        try:
            slow = P._decode_csv_slow(recs, *args)
        except tf.errors.InvalidArgumentError:
            slow = None
        if fast is None:
            outcomes["slow" if slow is not None else "error"] += 1
            continue
        outcomes["fast"] += 1
        assert slow is not None, recs
        for a, b in zip(fast, slow):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    assert min(outcomes.values()) > 10, outcomes  # every path was taken


def test_decode_csv_vectorised_kernel_keeps_shapes_select_cols_and_quoted_newlines(g):
    recs = tf.constant([['1,"a\nb",2.5,x', "3,c,4,y"], ['5,"d""e",6,z', "7,,8,w"]])
    a, b = tf.decode_csv(recs, [[0], ["?"]], select_cols=[0, 1])
    c, d = tf.decode_csv(recs, [[0], [0.0]], select_cols=[0, 2])
    with tf.Session() as s:
        ra, rb, rc, rd = s.run([a, b, c, d])
    assert ra.tolist() == [[1, 3], [5, 7]] and ra.dtype == np.int32
    assert rb.tolist() == [["a\nb", "c"], ['d"e', "?"]]
    assert rc.tolist() == [[1, 3], [5, 7]] and rd.tolist() == [[2.5, 4.0], [6.0, 8.0]]


def _seq_example(vals, strs=None):
    f = {"v": tf.train.Feature(int64_list=tf.train.Int64List(value=vals))}
    if strs is not None:
        f["s"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=strs))
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def test_fixed_len_sequence_feature_as_tf(g):
    """Values as TF 2.21 gives them (tf.io.FixedLenSequenceFeature, allow_missing=True)."""
    F = tf.io.FixedLenSequenceFeature
    recs = [_seq_example([1, 2, 3, 4]), _seq_example([], [b"a"]),
            _seq_example([5, 6], [b"b", b"c"])]
    both = tf.parse_example(recs, {"v": F([2], tf.int64, allow_missing=True),
                                   "s": F([], tf.string, allow_missing=True)})
    assert both["v"].shape.as_list() == [3, None, 2] and both["s"].shape.as_list() == [3, None]
    padded = tf.parse_example(recs, {"v": F([], tf.int64, allow_missing=True,
                                            default_value=-1)})
    one = tf.parse_single_example(recs[0], {"v": F([2], tf.int64, allow_missing=True)})
    assert one["v"].shape.as_list() == [None, 2]
    empty = tf.parse_single_example(recs[1], {"v": F([2], tf.int64, allow_missing=True),
                                              "x": tf.FixedLenSequenceFeature(
                                                  [], tf.float32, allow_missing=True)})
    bad = tf.parse_example(recs, {"v": F([3], tf.int64, allow_missing=True)})
    with tf.Session() as s:
        got = s.run(both)
        assert got["v"].tolist() == [[[1, 2], [3, 4]], [[0, 0], [0, 0]], [[5, 6], [0, 0]]]
        assert got["s"].tolist() == [[b"", b""], [b"a", b""], [b"b", b"c"]]
        assert s.run(padded)["v"].tolist() == [[1, 2, 3, 4], [-1, -1, -1, -1], [5, 6, -1, -1]]
        assert s.run(one)["v"].tolist() == [[1, 2], [3, 4]]
        e = s.run(empty)
        assert e["v"].shape == (0, 2) and e["x"].shape == (0,) and e["x"].dtype == np.float32
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Key: v, Index: 0.  Number "
                           r"of int64 values is not a multiple of stride length. Saw 4 values "
                           r"but output shape is: \[\?,3\]"):
            s.run(bad)
    with pytest.raises(ValueError, match="FixedLenSequenceFeature requires allow_missing"):
        tf.parse_example(recs, {"v": F([2], tf.int64)})


def test_sparse_feature_as_tf(g):
    """tf.SparseFeature: coordinates from index features, sorted unless already_sorted; the
    values TF 2.21 gives."""
    def ex(ix, v):
        return tf.train.Example(features=tf.train.Features(feature={
            "ix": tf.train.Feature(int64_list=tf.train.Int64List(value=ix)),
            "val": tf.train.Feature(float_list=tf.train.FloatList(value=v))})
        ).SerializeToString()
    recs = [ex([3, 1], [0.5, 1.5]), ex([], []), ex([9], [2.0])]
    sp = tf.parse_example(recs, {"sp": tf.SparseFeature("ix", "val", tf.float32, 10)})["sp"]
    kept = tf.parse_example(recs, {"sp": tf.SparseFeature("ix", "val", tf.float32, 10,
                                                          already_sorted=True)})["sp"]
    one = tf.parse_single_example(recs[0], {"sp": tf.SparseFeature("ix", "val", tf.float32,
                                                                   10)})["sp"]
    two = tf.parse_example(recs, {"sp": tf.SparseFeature(["ix", "ix"], "val", tf.float32,
                                                         [10, 10])})["sp"]
    bad = tf.parse_example([ex([1, 2], [1.0])], {"sp": tf.SparseFeature("ix", "val",
                                                                        tf.float32, 5)})
    assert sp.shape.as_list() == [None, 10] and one.shape.as_list() == [10]
    assert two.shape.as_list() == [None, 10, 10]
    with tf.Session() as s:
        v = s.run(sp)
        assert v.indices.tolist() == [[0, 1], [0, 3], [2, 9]]
        assert v.values.tolist() == [1.5, 0.5, 2.0] and v.dense_shape.tolist() == [3, 10]
        assert s.run(kept).indices.tolist() == [[0, 3], [0, 1], [2, 9]]
        o = s.run(one)
        assert o.indices.tolist() == [[1], [3]] and o.dense_shape.tolist() == [10]
        assert s.run(two).indices.tolist() == [[0, 1, 1], [0, 3, 3], [2, 9, 9]]
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Number of elements in "
                           r"indices \(2\) and values \(1\) do not match"):
            s.run(bad)
