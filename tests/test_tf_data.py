"""``tv.data`` (TF 1.x's graph-mode ``tf.data``): sources, transformations and iterators,
checked against NumPy and closed forms; TF's errors by class and message."""
import numpy as np
import pytest
import tensorvm as tf
from tensorvm.framework import errors


def drain(sess, nxt, limit=10_000):
    """Every element of an iterator, in the TF 1.x loop (until OutOfRangeError)."""
    out = []
    while True:
        try:
            out.append(sess.run(nxt))
        except tf.errors.OutOfRangeError:
            break
        assert len(out) < limit, "the iterator never ended"
    return out


def elements(ds):
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        return drain(sess, nxt)


def as_lists(xs):
    return [np.asarray(x).tolist() for x in xs]


# ---- sources ----------------------------------------------------------------------------------

def test_from_tensor_slices_batch_is_the_array_cut_in_batches():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    got = elements(tf.data.Dataset.from_tensor_slices(x).batch(4))
    assert as_lists(got) == [x[0:4].tolist(), x[4:8].tolist(), x[8:10].tolist()]
    assert got[0].dtype == np.float32


def test_from_tensor_slices_tuple_and_dict_keep_their_structure():
    x = np.arange(6).reshape(3, 2)
    y = np.array([1.5, 2.5, 3.5])
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    assert ds.output_types == (tf.int64, tf.float64)
    assert [list(s.as_list()) for s in ds.output_shapes] == [[2], []]
    got = elements(ds)
    assert [(a.tolist(), float(b)) for a, b in got] == [([0, 1], 1.5), ([2, 3], 2.5),
                                                         ([4, 5], 3.5)]
    dd = tf.data.Dataset.from_tensor_slices({"a": x, "b": y}).batch(2)
    assert dd.output_types == {"a": tf.int64, "b": tf.float64}
    assert dd.output_shapes["a"].as_list() == [None, 2]
    got = elements(dd)
    assert got[0]["a"].tolist() == [[0, 1], [2, 3]] and got[1]["b"].tolist() == [3.5]


def test_from_tensors_range_zip():
    assert as_lists(elements(tf.data.Dataset.from_tensors([1, 2]))) == [[1, 2]]
    assert tf.data.Dataset.from_tensors([1, 2]).output_shapes.as_list() == [2]
    assert as_lists(elements(tf.data.Dataset.range(2, 11, 3))) == [2, 5, 8]
    assert tf.data.Dataset.range(3).output_types == tf.int64
    z = tf.data.Dataset.zip((tf.data.Dataset.range(3), tf.data.Dataset.range(10, 15)))
    assert [(int(a), int(b)) for a, b in elements(z)] == [(0, 10), (1, 11), (2, 12)]


def test_text_line_and_tfrecord_datasets_read_fsspec_urls():
    import fsspec
    fs = fsspec.filesystem("memory")
    fs.pipe("/tvm-data-test/a.txt", b"l1\nl2\r\nl3")
    fs.pipe("/tvm-data-test/b.txt", b"m1\n")
    ds = tf.data.TextLineDataset(["memory://tvm-data-test/a.txt",
                                  "memory://tvm-data-test/b.txt"])
    assert ds.output_types == tf.string
    assert [str(s) for s in elements(ds)] == ["l1", "l2", "l3", "m1"]
    recs = [b"rec%d" % i for i in range(5)]
    with tf.python_io.TFRecordWriter("memory://tvm-data-test/r.tfrecord") as w:
        for r in recs:
            w.write(r)
    got = elements(tf.data.TFRecordDataset("memory://tvm-data-test/r.tfrecord").batch(2))
    assert [list(b) for b in got] == [recs[0:2], recs[2:4], recs[4:5]]


def test_tfrecord_dataset_parsed_with_one_feature_and_csv_lines():
    import fsspec
    ex = tf.train.Example(features=tf.train.Features(feature={
        "v": tf.train.Feature(int64_list=tf.train.Int64List(value=[7, 8]))}))
    with tf.python_io.TFRecordWriter("memory://tvm-data-test/ex.tfrecord") as w:
        for _ in range(3):
            w.write(ex.SerializeToString())
    ds = tf.data.TFRecordDataset(["memory://tvm-data-test/ex.tfrecord"]).map(
        lambda r: tf.parse_single_example(r, {"v": tf.FixedLenFeature([2], tf.int64)}))
    got = elements(ds.batch(3))
    assert got[0]["v"].tolist() == [[7, 8]] * 3
    fsspec.filesystem("memory").pipe("/tvm-data-test/a.csv", b"x,y,name\n1,2.5,a\n3,4.5,b\n")
    ds = tf.data.TextLineDataset("memory://tvm-data-test/a.csv").skip(1).map(
        lambda line: tf.decode_csv(line, [[0], [0.0], [""]])).batch(2)
    assert ds.output_types == (tf.int32, tf.float32, tf.string)
    ((x, y, name),) = elements(ds)
    assert x.tolist() == [1, 3] and y.tolist() == [2.5, 4.5] and name.tolist() == ["a", "b"]


def test_single_column_parsers_give_the_tensor_not_a_tuple():
    # decode_csv of one column and parse_single_example of one feature returned a 1-tuple
    # as the op's one value (sess.run gave (array,)), which map then batched as [n, 1, ...]
    r = tf.placeholder(tf.string, [None])
    with tf.Session() as sess:
        got = sess.run(tf.decode_csv(r, [[0]]), {r: ["1", "2"]})
    assert isinstance(got, list) and got[0].tolist() == [1, 2]


@pytest.mark.parametrize("name, compression", [("examples.tfrecord", None),
                                               ("examples_gzip.tfrecord", "GZIP")])
def test_tfrecord_files_written_by_tf_parse_in_a_batched_pipeline(name, compression):
    import os
    url = os.path.join(os.path.dirname(__file__), "data", name)
    spec = {"id": tf.FixedLenFeature([], tf.int64), "xy": tf.FixedLenFeature([2], tf.float32),
            "name": tf.FixedLenFeature([], tf.string)}
    ds = tf.data.TFRecordDataset([url], compression_type=compression).map(
        lambda r: tf.parse_single_example(r, spec)).batch(5)
    (got,) = elements(ds)
    i = np.arange(5)
    assert got["id"].tolist() == i.tolist()
    np.testing.assert_array_equal(got["xy"], np.stack([i * 0.5, -i], 1).astype(np.float32))
    assert [bytes(n) if not isinstance(n, str) else n.encode() for n in got["name"]] == \
        [b"ex%d" % k for k in i]


def test_gzip_text_lines():
    import gzip

    import fsspec
    fsspec.filesystem("memory").pipe("/tvm-data-test/z.txt.gz", gzip.compress(b"a\nb\n"))
    ds = tf.data.TextLineDataset("memory://tvm-data-test/z.txt.gz", compression_type="GZIP")
    assert [str(s) for s in elements(ds)] == ["a", "b"]


def test_missing_text_file_is_not_found():
    nxt = tf.data.TextLineDataset(["memory://tvm-data-test/none.txt"]) \
        .make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(errors.NotFoundError, match="none.txt"):
        sess.run(nxt)


# ---- transformations ----------------------------------------------------------------------------

def test_skip_take_repeat_batch_sequence_matches_tf():
    # TF 2.21 (compat.v1) gives exactly these batches
    got = elements(tf.data.Dataset.range(10).skip(2).take(5).repeat(2).batch(3))
    assert as_lists(got) == [[2, 3, 4], [5, 6, 2], [3, 4, 5], [6]]


def test_filter_map_batch_drop_remainder_matches_tf():
    ds = tf.data.Dataset.range(10).filter(lambda x: x % 3 > 0).map(lambda x: x * 2) \
        .batch(4, drop_remainder=True)
    assert ds.output_shapes.as_list() == [4]
    assert as_lists(elements(ds)) == [[2, 4, 8, 10]]


def test_map_traces_the_function_once_into_tensor_ops():
    calls = []
    w = tf.constant([[1.0], [2.0]])

    def fn(x, y):
        calls.append(1)
        return {"z": tf.matmul(tf.reshape(x, [1, 2]), w)[0, 0] + y, "x": x}
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    y = np.arange(4, dtype=np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(fn, num_parallel_calls=4)
    got = elements(ds.batch(3))
    assert len(calls) == 1
    want = x @ np.array([1.0, 2.0], np.float32) + y
    np.testing.assert_allclose(np.concatenate([b["z"] for b in got]), want)
    np.testing.assert_array_equal(np.concatenate([b["x"] for b in got]), x)


def test_shuffle_with_a_seed_is_a_deterministic_permutation():
    ds = tf.data.Dataset.range(100).shuffle(30, seed=7)
    a = [int(v) for v in elements(ds)]
    b = [int(v) for v in elements(ds)]
    assert a == b and sorted(a) == list(range(100)) and a != list(range(100))
    # each element leaves the buffer no earlier than its turn in the buffer allows
    assert all(pos >= v - 30 for pos, v in enumerate(a))
    c = [int(v) for v in elements(tf.data.Dataset.range(100).shuffle(30, seed=8))]
    assert c != a and sorted(c) == list(range(100))


def test_shuffle_reshuffles_each_epoch_of_a_repeat():
    got = [int(v) for v in elements(tf.data.Dataset.range(10).shuffle(10, seed=1).repeat(3))]
    epochs = [got[0:10], got[10:20], got[20:30]]
    assert all(sorted(e) == list(range(10)) for e in epochs)
    assert epochs[0] != epochs[1] or epochs[1] != epochs[2]


def test_a_full_buffer_shuffle_draws_uniform_permutations():
    got = elements(tf.data.Dataset.range(5).shuffle(5, seed=11).repeat(1000).batch(5))
    perms = np.stack(got)
    assert perms.shape == (1000, 5)
    assert (np.sort(perms, axis=1) == np.arange(5)).all()
    counts = np.stack([(perms == v).sum(0) for v in range(5)])  # value x position
    assert np.abs(counts - 200).max() < 60  # 200 each; sd about 12.6
    assert len({tuple(p) for p in perms.tolist()}) > 100  # of the 120 permutations


def test_repeat_take_counts():
    assert len(elements(tf.data.Dataset.range(7).repeat(3))) == 21
    got = [int(v) for v in elements(tf.data.Dataset.range(3).repeat().take(8))]
    assert got == [0, 1, 2, 0, 1, 2, 0, 1]
    assert [int(v) for v in elements(tf.data.Dataset.range(4).take(-1))] == [0, 1, 2, 3]
    assert elements(tf.data.Dataset.range(0).repeat()) == []


def test_cache_prefetch_padded_batch():
    calls = []

    def count(x):
        return tf.py_func(lambda v: calls.append(1) or v, [x], tf.int64)
    got = elements(tf.data.Dataset.range(4).map(count).cache().repeat(3).prefetch(1))
    assert [int(v) for v in got] == [0, 1, 2, 3] * 3
    assert len(calls) == 4  # later epochs come from the cache
    ds = tf.data.Dataset.range(5).map(lambda x: tf.fill([x], x)).padded_batch(
        2, padded_shapes=[None])
    assert as_lists(elements(ds)) == [[[0], [1]], [[2, 2, 0], [3, 3, 3]], [[4, 4, 4, 4]]]


def test_unbatch_shard_concatenate_skip_match_tf():
    # each sequence as TF 2.21 (compat.v1) gives it
    ds = tf.data.Dataset.range(10).batch(3).apply(tf.data.experimental.unbatch()).shard(3, 1)
    assert as_lists(elements(ds)) == [1, 4, 7]
    ds = tf.data.Dataset.range(3).concatenate(tf.data.Dataset.range(7, 9)).skip(1)
    assert as_lists(elements(ds)) == [1, 2, 7, 8]
    assert elements(tf.data.Dataset.range(3).skip(-1)) == []
    ds = tf.data.Dataset.range(1, 4).map(lambda x: tf.fill([x], x)).padded_batch(
        2, padded_shapes=[4], padding_values=tf.constant(-1, tf.int64))
    assert as_lists(elements(ds)) == [[[1, -1, -1, -1], [2, 2, -1, -1]], [[3, 3, 3, -1]]]


def test_flat_map_and_interleave_match_tf():
    # each sequence as TF 2.21 (compat.v1) gives it
    ds = tf.data.Dataset.range(1, 4).flat_map(
        lambda x: tf.data.Dataset.range(x).map(lambda y: y * 10 + x))
    assert as_lists(elements(ds)) == [1, 2, 12, 3, 13, 23]
    ds = tf.data.Dataset.range(1, 6).interleave(
        lambda x: tf.data.Dataset.from_tensors(x).repeat(x), cycle_length=2, block_length=2)
    assert as_lists(elements(ds)) == [1, 2, 2, 3, 3, 3, 4, 4, 5, 5, 4, 4, 5, 5, 5]
    ds = tf.data.Dataset.range(1, 5).interleave(lambda x: tf.data.Dataset.range(x),
                                                cycle_length=3, block_length=1)
    assert as_lists(elements(ds)) == [0, 0, 0, 1, 1, 0, 2, 1, 2, 3]


def test_interleave_reads_files_listed_by_list_files():
    import fsspec
    fs = fsspec.filesystem("memory")
    for k in range(3):
        fs.pipe(f"/tvm-data-files/part-{k}.csv", b"h\n" + b"".join(
            b"%d\n" % (10 * k + i) for i in range(3)))
    files = tf.data.Dataset.list_files("memory://tvm-data-files/part-*.csv", shuffle=False)
    ds = files.interleave(lambda f: tf.data.TextLineDataset(f).skip(1), cycle_length=3)
    assert [int(s) for s in elements(ds)] == [0, 10, 20, 1, 11, 21, 2, 12, 22]
    with pytest.raises(TypeError, match="must return a `Dataset`"):
        files.flat_map(lambda f: f)


def test_experimental_transformations_applied():
    x = tf.data.experimental
    ds = tf.data.Dataset.range(7).apply(x.map_and_batch(lambda v: v + 1, 3)) \
        .apply(x.unbatch()).apply(x.batch_and_drop_remainder(2))
    assert as_lists(elements(ds)) == [[1, 2], [3, 4], [5, 6]]
    ds = tf.data.Dataset.range(3).apply(x.shuffle_and_repeat(3, count=2, seed=5))
    got = [int(v) for v in elements(ds)]
    assert sorted(got[:3]) == sorted(got[3:]) == [0, 1, 2]
    ds = tf.data.Dataset.range(1, 3).apply(
        x.parallel_interleave(lambda v: tf.data.Dataset.range(v), cycle_length=2))
    assert as_lists(elements(ds)) == [0, 0, 1]
    assert x.AUTOTUNE == -1


def test_from_generator_matches_tf():
    def gen():
        for i in range(4):
            yield i, [i] * (i % 2 + 1)
    ds = tf.data.Dataset.from_generator(gen, (tf.int64, tf.int32),
                                        (tf.TensorShape([]), tf.TensorShape([None])))
    assert [(int(a), b.tolist()) for a, b in elements(ds)] == \
        [(0, [0]), (1, [1, 1]), (2, [2]), (3, [3, 3])]
    got = elements(ds.padded_batch(2, padded_shapes=([], [None])))
    assert [(a.tolist(), b.tolist()) for a, b in got] == \
        [([0, 1], [[0, 0], [1, 1]]), ([2, 3], [[2, 0], [3, 3]])]

    def bad():
        yield 1
        yield (1, 2)
    nxt = tf.data.Dataset.from_generator(bad, tf.int64, tf.TensorShape([])) \
        .make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert int(sess.run(nxt)) == 1
        with pytest.raises(errors.InvalidArgumentError, match=r"`generator` yielded an element "
                           r"of shape \(2,\) where an element of shape \(\) was expected"):
            sess.run(nxt)  # TF's message


# ---- iterators --------------------------------------------------------------------------------

def test_end_of_data_is_out_of_range_and_the_position_survives_runs():
    it = tf.data.Dataset.range(3).make_one_shot_iterator()
    nxt = it.get_next()
    assert it.output_types == tf.int64 and nxt.dtype == tf.int64
    with tf.Session() as sess:
        assert [int(sess.run(nxt)) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(tf.errors.OutOfRangeError, match="End of sequence"):
            sess.run(nxt)
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(nxt)


def test_initializable_iterator_reinitialized_with_another_feed():
    p = tf.placeholder(tf.float32, [None, 2])
    n = tf.placeholder(tf.int64, [])
    it = tf.data.Dataset.from_tensor_slices(p).batch(n).make_initializable_iterator()
    nxt = it.get_next()
    assert nxt.shape.as_list() == [None, 2]
    a = np.arange(10, dtype=np.float32).reshape(5, 2)
    b = -np.arange(6, dtype=np.float32).reshape(3, 2)
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="not been initialized"):
            sess.run(nxt)
        sess.run(it.initializer, {p: a, n: 2})
        assert as_lists(drain(sess, nxt)) == [a[:2].tolist(), a[2:4].tolist(), a[4:].tolist()]
        sess.run(it.initializer, {p: b, n: 3})
        assert as_lists(drain(sess, nxt)) == [b.tolist()]


def test_reinitializable_iterator_from_structure():
    train = tf.data.Dataset.range(5).map(lambda x: x * 10)
    val = tf.data.Dataset.range(2)
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    nxt = it.get_next()
    t_init, v_init = it.make_initializer(train), it.make_initializer(val)
    with tf.Session() as sess:
        sess.run(t_init)
        assert [int(sess.run(nxt)) for _ in range(2)] == [0, 10]
        sess.run(v_init)
        assert [int(v) for v in drain(sess, nxt)] == [0, 1]
    with pytest.raises(TypeError, match="Expected output types"):
        it.make_initializer(val.map(lambda x: tf.cast(x, tf.float32)))


def test_feedable_iterator_switches_between_datasets_by_handle():
    train = tf.data.Dataset.range(100).repeat().make_one_shot_iterator()
    val = tf.data.Dataset.range(1000, 1003).make_initializable_iterator()
    handle = tf.placeholder(tf.string, [])
    it = tf.data.Iterator.from_string_handle(handle, train.output_types, train.output_shapes)
    nxt = it.get_next()
    with tf.Session() as sess:
        th, vh = sess.run([train.string_handle(), val.string_handle()])
        sess.run(val.initializer)
        assert [int(sess.run(nxt, {handle: th})) for _ in range(3)] == [0, 1, 2]
        assert [int(v) for v in drain_fed(sess, nxt, {handle: vh})] == [1000, 1001, 1002]
        assert int(sess.run(nxt, {handle: th})) == 3  # the training position survived


def drain_fed(sess, nxt, feed):
    out = []
    while True:
        try:
            out.append(sess.run(nxt, feed))
        except tf.errors.OutOfRangeError:
            return out


def test_monitored_session_stops_at_the_end_of_the_data():
    nxt = tf.data.Dataset.range(5).batch(2).make_one_shot_iterator().get_next()
    total = tf.Variable(0, dtype=tf.int64)
    step = tf.assign_add(total, tf.reduce_sum(nxt))
    seen = []
    with tf.train.MonitoredTrainingSession() as sess:
        while not sess.should_stop():
            seen.append(int(sess.run(step)))
    assert seen == [1, 6, 10]


def test_linear_model_trained_from_a_dataset_reaches_least_squares():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(256, 3)).astype(np.float32)
    y = (X @ np.array([1.5, -2.0, 0.5], np.float32) + 0.3 +
         0.01 * rng.normal(size=256)).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((X, y)).shuffle(256, seed=3).repeat(60).batch(32)
    xb, yb = ds.make_one_shot_iterator().get_next()
    w = tf.Variable(tf.zeros([3, 1]))
    b = tf.Variable(0.0)
    pred = tf.squeeze(tf.matmul(xb, w), 1) + b
    loss = tf.reduce_mean(tf.square(pred - yb))
    step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        steps = 0
        while True:
            try:
                sess.run(step)
                steps += 1
            except tf.errors.OutOfRangeError:
                break
        wv, bv = sess.run([w, b])
    assert steps == 60 * 256 // 32
    A = np.hstack([X, np.ones((256, 1), np.float32)])
    sol = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(np.append(wv.ravel(), bv), sol, atol=2e-3)


# ---- errors -----------------------------------------------------------------------------------

def test_bad_inputs_fail_with_tf_classes_and_messages():
    with pytest.raises(ValueError, match="Dimensions 3 and 4 are not compatible"):
        tf.data.Dataset.from_tensor_slices((np.arange(3), np.arange(4)))
    with pytest.raises(errors.InvalidArgumentError, match="Batch size must be greater than "
                                                          "zero"):
        tf.data.Dataset.range(5).batch(0)
    with pytest.raises(TypeError, match="Unsupported return value from function passed to "
                                        "Dataset.map"):
        tf.data.Dataset.range(5).map(lambda x: object())
    with pytest.raises(ValueError, match="`predicate` must return a `tf.bool` scalar"):
        tf.data.Dataset.range(4).filter(lambda x: x)
    with pytest.raises(ValueError, match="Cannot capture a placeholder"):
        tf.data.Dataset.from_tensor_slices(tf.placeholder(tf.int64, [None])) \
            .make_one_shot_iterator()
    with pytest.raises(ValueError, match="rank >= 1"):
        tf.data.Dataset.from_tensor_slices(3)
    with pytest.raises(RuntimeError, match="__iter__"):
        iter(tf.data.Dataset.range(3))
    with pytest.raises(ValueError, match="Iterator does not have an initializer"):
        _ = tf.data.Iterator.from_structure(tf.int64, []).initializer


def test_batching_elements_of_different_shapes_fails_like_tf():
    ds = tf.data.Dataset.range(1, 4).map(lambda x: tf.fill([x], x)).batch(2)
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                             match="Cannot add tensor to the batch"):
        sess.run(nxt)


def test_dynamic_batch_size_zero_fails_at_run_time():
    n = tf.placeholder(tf.int64, [])
    it = tf.data.Dataset.range(3).batch(n).make_initializable_iterator()
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                             match="Batch size must be greater than zero"):
        sess.run(it.initializer, {n: 0})


# ---- on a cluster of worker processes --------------------------------------------------------

TV_CLUSTER = {"ps": 1, "worker": 1}
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state
PS, WORKER = "/job:ps/task:0", "/job:worker/task:0"


@pytest.mark.cluster
def test_an_iterator_lives_on_its_device_in_a_worker_process(cluster):
    graph = tf.Graph()
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    with graph.as_default():
        scale = tf.placeholder(tf.float32, [])
        with tf.device(PS):
            ds = tf.data.Dataset.from_tensor_slices(x).map(lambda r: r * scale).batch(4)
            it = ds.make_initializable_iterator()
        with tf.device(WORKER):
            total = tf.reduce_sum(it.get_next(), axis=1)  # read on the PS, summed here
    s = cluster.session(graph)
    md = tf.RunMetadata()
    s.run(it.initializer, {scale: 10.0})
    first = s.run(total, options=tf.RunOptions(trace=True), run_metadata=md)
    where = {op: r["device"] for r in md.step_stats for op in r["ops"]}
    assert "/job:ps/" in where["IteratorGetNext"] and "/job:worker/" in where["Sum"]
    np.testing.assert_allclose(first, (x[:4] * 10).sum(1))
    np.testing.assert_allclose(s.run(total), (x[4:] * 10).sum(1))  # the position survived
    with pytest.raises(tf.errors.OutOfRangeError, match="End of sequence"):
        s.run(total)


@pytest.mark.cluster
def test_windows_groups_and_reduce_run_in_a_worker_process(cluster):
    """The new stages and ops (traced functions, inner pipelines) travel to a worker."""
    graph = tf.Graph()
    with graph.as_default(), tf.device(PS):
        ds = tf.data.Dataset.range(10).window(4, 3).flat_map(lambda w: w.batch(4)) \
                .map(lambda b: tf.reduce_sum(b)).apply(tf.data.experimental.group_by_window(
                lambda v: v % 2, lambda k, w: w.batch(10), 10))
        nxt = ds.make_one_shot_iterator().get_next()
        total = tf.data.Dataset.range(10).scan(
            tf.constant(0, tf.int64), lambda s, v: (s + v, s)).reduce(
            tf.constant(0, tf.int64), lambda s, v: s + v)
    s = cluster.session(graph)
    # window sums 6, 18, 30, 9 grouped by parity: the even ones, then the odd ones
    assert [s.run(nxt).tolist() for _ in range(2)] == [[6, 18, 30], [9]]
    assert int(s.run(total)) == sum(sum(range(k)) for k in range(10))


def test_tf_contrib_data_spelling_of_tf_1_4_to_1_12():
    """``tf.contrib.data`` (TF 1.4-1.12 programs) was an AttributeError."""
    with tf.Graph().as_default():
        ds = tf.contrib.data.Dataset.range(7).apply(
            tf.contrib.data.batch_and_drop_remainder(3))
        nxt = ds.make_one_shot_iterator().get_next()
        with tf.Session() as s:
            got = [s.run(nxt).tolist() for _ in range(2)]
            with pytest.raises(tf.errors.OutOfRangeError):
                s.run(nxt)
    assert got == [[0, 1, 2], [3, 4, 5]]
    assert tf.contrib.data.Dataset is tf.data.Dataset


# ---- window, scan, reduce and the other TF 1.15 transformations ------------------------------

def ref_windows(items, size, shift, stride, drop):
    """TF's window(): windows start every ``shift`` items while one starts inside the input."""
    out, start = [], 0
    while start < len(items):
        w = items[start:start + (size - 1) * stride + 1:stride]
        if len(w) < size and drop:
            break
        out.append(w)
        start += shift
    return out


@pytest.mark.parametrize("size,shift,stride,drop", [
    (3, 2, 1, False), (3, 1, 2, False), (3, 4, 1, True), (2, 3, 1, False), (1, 1, 1, False),
    (4, None, 1, False), (4, None, 1, True), (5, 2, 3, False), (2, 7, 2, True)])
def test_window_flat_map_batch_matches_the_reference(size, shift, stride, drop, monkeypatch):
    import tensorvm.ops.data.dataset_sources as sources
    monkeypatch.setattr(sources, "CHUNK", 4)  # windows that span the source's blocks
    n = 23
    ds = tf.data.Dataset.range(n).window(size, shift, stride, drop) \
        .flat_map(lambda w: w.batch(size))
    want = ref_windows(list(range(n)), size, size if shift is None else shift, stride, drop)
    assert as_lists(elements(ds)) == want
    assert elements(tf.data.Dataset.range(0).window(2).flat_map(lambda w: w.batch(2))) == []


def test_window_of_tuples_dicts_and_strings_keeps_the_structure():
    ds = tf.data.Dataset.from_tensor_slices(([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])).window(2)
    assert ds.output_types == (tf.int32, tf.int32)
    assert ds.output_classes == (tf.data.Dataset, tf.data.Dataset)
    got = elements(ds.flat_map(lambda a, b: tf.data.Dataset.zip((a.batch(2), b.batch(2)))))
    assert [(a.tolist(), b.tolist()) for a, b in got] == \
        [([1, 2], [6, 7]), ([3, 4], [8, 9]), ([5], [10])]
    dd = tf.data.Dataset.from_tensor_slices({"a": ["x", "y", "z"]}).window(2, 1, 1, True)
    got = elements(dd.flat_map(lambda d: d["a"].batch(2)))
    assert [g.tolist() for g in got] == [["x", "y"], ["y", "z"]]
    # rows of a matrix, and the sliding-window pattern with shapes (TF 1.15's time series)
    x = np.arange(12.0).reshape(6, 2)
    ds = tf.data.Dataset.from_tensor_slices(x).window(3, 1, 1, True) \
        .flat_map(lambda w: w.batch(3, drop_remainder=True)).batch(2)
    assert ds.output_shapes.as_list() == [None, 3, 2]
    got = np.concatenate(elements(ds))
    np.testing.assert_array_equal(got, np.stack([x[i:i + 3] for i in range(4)]))


def test_windows_read_by_interleave_map_and_filter():
    ds = tf.data.Dataset.range(6).window(3).interleave(lambda w: w, cycle_length=2)
    assert as_lists(elements(ds)) == [0, 3, 1, 4, 2, 5]
    sums = tf.data.Dataset.range(7).window(3).map(
        lambda w: w.reduce(tf.constant(0, tf.int64), lambda s, v: s + v))
    assert as_lists(elements(sums)) == [3, 12, 6]
    kept = tf.data.Dataset.range(7).window(3).filter(
        lambda w: w.reduce(tf.constant(0, tf.int64), lambda s, v: s + v) > 5) \
        .flat_map(lambda w: w.batch(3))
    assert as_lists(elements(kept)) == [[3, 4, 5], [6]]


def test_window_bad_inputs_fail_like_tf():
    with pytest.raises(errors.InvalidArgumentError, match="Window size must be greater than "
                                                          "zero."):
        tf.data.Dataset.range(5).window(0)
    with pytest.raises(errors.InvalidArgumentError, match="Window shift must be greater"):
        tf.data.Dataset.range(5).window(2, 0)
    with pytest.raises(errors.InvalidArgumentError, match="Window stride must be greater"):
        tf.data.Dataset.range(5).window(2, 1, -1)
    n = tf.placeholder(tf.int64, [])
    it = tf.data.Dataset.range(5).window(n).flat_map(lambda w: w.batch(2)) \
        .make_initializable_iterator()
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                             match="Window size must be greater than zero."):
        sess.run(it.initializer, {n: 0})
    w = tf.data.Dataset.range(5).window(2)
    for what, build in (("batch", lambda: w.batch(2)), ("unbatch", w.unbatch),
                        ("make_one_shot_iterator", w.make_one_shot_iterator),
                        ("reduce", lambda: w.reduce(0, lambda s, v: s))):
        with pytest.raises(TypeError, match=f"{what}: the elements of this dataset are "
                                            "datasets"):
            build()


def test_scan_carries_its_state_and_restarts_each_epoch():
    ds = tf.data.Dataset.range(5).apply(tf.data.experimental.scan(
        tf.constant(0, tf.int64), lambda s, x: (s + x, s * 10)))
    assert as_lists(elements(ds)) == [0, 0, 10, 30, 60]  # as TF 2.21 gives it
    xs = np.random.default_rng(1).normal(size=(9, 2))
    ds = tf.data.Dataset.from_tensor_slices(xs).scan(
        (tf.zeros([2], tf.float64), tf.constant(0)),
        lambda st, x: ((st[0] + x, st[1] + 1), {"mean": (st[0] + x) / tf.cast(st[1] + 1,
                                                                              tf.float64)}))
    assert ds.output_shapes["mean"].as_list() == [2]
    got = np.stack([e["mean"] for e in elements(ds)])
    np.testing.assert_allclose(got, np.cumsum(xs, 0) / np.arange(1, 10)[:, None])
    again = tf.data.Dataset.range(3).scan(tf.constant(0, tf.int64),
                                          lambda s, x: (s + x, s + x)).repeat(2)
    assert as_lists(elements(again)) == [0, 1, 3, 0, 1, 3]
    # a state whose shape grows: its static shape is relaxed, as TF's
    grow = tf.data.Dataset.range(4).scan(tf.zeros([0], tf.int64),
                                         lambda s, x: (tf.concat([s, [x]], 0), tf.size(s)))
    assert as_lists(elements(grow)) == [0, 1, 2, 3]


def test_scan_bad_functions_fail_when_built():
    r = tf.data.Dataset.range(5)
    with pytest.raises(TypeError, match="`scan_func` should return a pair consisting of new "
                                        "state and the output value"):
        r.scan(tf.constant(0, tf.int64), lambda s, x: s + x)
    with pytest.raises(TypeError, match=r"Invalid `scan_func`. The element types for the new "
                                        r"state must match the initial state. Expected "
                                        r"<dtype: 'int64'>, got <dtype: 'float32'>."):
        r.scan(tf.constant(0, tf.int64), lambda s, x: (tf.cast(s, tf.float32), x))
    with pytest.raises(TypeError, match="The structure of the new state must match the "
                                        "initial state"):
        r.scan((tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
               lambda s, x: (s[0] + x, x))


def test_reduce_folds_every_element_into_the_state():
    xs = np.random.default_rng(2).normal(size=(50, 3)).astype(np.float32)
    p = tf.placeholder(tf.float32, [])
    ds = tf.data.Dataset.from_tensor_slices(xs).map(lambda r: r * p)
    total, count = ds.reduce((tf.zeros([3]), tf.constant(0, tf.int64)),
                             lambda st, r: (st[0] + r, st[1] + 1))
    grow = tf.data.Dataset.range(4).reduce(tf.zeros([0], tf.int64),
                                           lambda s, x: tf.concat([s, [x * x]], 0))
    assert grow.shape.as_list() == [None] and total.shape.as_list() == [3]
    pairs = tf.data.Dataset.from_tensor_slices(([1, 2], [3, 4])).reduce(
        tf.constant(0), lambda s, e: s + e[0] * e[1])  # the element comes whole
    empty = tf.data.Dataset.range(0).reduce(tf.constant(7, tf.int64), lambda s, x: s + x)
    with tf.Session() as sess:
        t, c, g, pr, e = sess.run([total, count, grow, pairs, empty], {p: 2.0})
        np.testing.assert_allclose(t, 2 * xs.sum(0), rtol=1e-5)
        assert int(c) == 50 and g.tolist() == [0, 1, 4, 9] and int(pr) == 11 and int(e) == 7
        np.testing.assert_allclose(sess.run(total, {p: -1.0}), -xs.sum(0), rtol=1e-5)
    with pytest.raises(TypeError, match=r"The element types for the new state must match the "
                                        r"initial state. Expected <dtype: 'int64'> but got "
                                        r"<dtype: 'float32'>."):
        tf.data.Dataset.range(5).reduce(tf.constant(0, tf.int64),
                                        lambda s, x: tf.cast(s, tf.float32))
    with pytest.raises(TypeError, match="structure of the new state must match"):
        tf.data.Dataset.range(5).reduce((tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
                                        lambda s, x: s[0] + x)


def test_take_while_enumerate_unique_get_single_element_match_tf():
    x = tf.data.experimental
    assert as_lists(elements(tf.data.Dataset.range(10).apply(x.take_while(
        lambda v: v < 4)))) == [0, 1, 2, 3]
    assert elements(tf.data.Dataset.range(10).take_while(lambda v: v > 4)) == []
    with pytest.raises(ValueError, match="`predicate` must return a `tf.bool` scalar"):
        tf.data.Dataset.range(5).take_while(lambda v: v)
    got = elements(tf.data.Dataset.range(3, 6).enumerate(start=5))
    assert [(int(i), int(v)) for i, v in got] == [(5, 3), (6, 4), (7, 5)]
    got = elements(tf.data.Dataset.range(2).apply(x.enumerate_dataset()))
    assert [(int(i), int(v)) for i, v in got] == [(0, 0), (1, 1)]
    vals = [3, 1, 3, 2, 1, 5, 2, 8]
    assert as_lists(elements(tf.data.Dataset.from_tensor_slices(vals).apply(x.unique()))) == \
        list(dict.fromkeys(vals))
    ds = tf.data.Dataset.from_tensor_slices(["b", "a", "b", "c"]).concatenate(
        tf.data.Dataset.from_tensor_slices(["a", "d"])).unique()
    assert [str(v) for v in elements(ds)] == ["b", "a", "c", "d"]
    with pytest.raises(TypeError, match=r"`tf.data.Dataset.unique` does not support type "
                                        r"tv.float32 -- only `tf.int32`, `tf.int64`, and "
                                        r"`tf.string` are supported."):
        tf.data.Dataset.from_tensor_slices([1.0]).unique()
    one = x.get_single_element(tf.data.Dataset.from_tensors(([1, 2], "s")))
    with tf.Session() as sess:
        a, b = sess.run(one)
        assert a.tolist() == [1, 2] and b == "s"
        for n, msg in ((0, "Dataset was empty."), (2, "Dataset had more than one element.")):
            with pytest.raises(errors.InvalidArgumentError, match=msg):
                sess.run(tf.data.Dataset.range(n).get_single_element())


def test_ignore_errors_drops_failing_elements_and_ends_a_failed_input():
    ds = tf.data.Dataset.from_tensor_slices(["1", "2", "x", "4"]).map(
        lambda s: tf.strings.to_number(s)).apply(tf.data.experimental.ignore_errors())
    assert as_lists(elements(ds)) == [1.0, 2.0, 4.0]  # as TF 2.21 gives it

    def gen():
        yield 1
        yield "x"  # not an int64: dropped, the generator goes on (TF)
        yield 3
        raise ValueError("boom")  # ends the generator: ends the input
    ds = tf.data.Dataset.from_generator(gen, tf.int64).ignore_errors()
    assert as_lists(elements(ds)) == [1, 3]
    # a batch of elements of different shapes fails alone: dropped, the next ones go on
    sizes = tf.data.Dataset.from_tensor_slices([1, 1, 2, 2, 2, 3, 3]).map(
        lambda n: tf.fill([n], n))
    assert as_lists(elements(sizes.batch(2).ignore_errors())) == \
        [[[1], [1]], [[2, 2], [2, 2]], [[3, 3, 3]]]  # as TF 2.21 gives it
    assert as_lists(elements(sizes.batch(3).ignore_errors())) == [[[3, 3, 3]]]
    # without ignore_errors the same map fails the step, naming the bad value
    nxt = tf.data.Dataset.from_tensor_slices(["x"]).map(
        lambda s: tf.strings.to_number(s)).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError):
        sess.run(nxt)


def test_from_generator_errors_surface_with_their_messages():
    def raises():
        yield 1
        raise ValueError("boom from the generator")

    def wrong_type():
        yield "abc"

    def wrong_shape():
        yield [1, 2]

    def wrong_structure():
        yield 1
    cases = [
        (raises, tf.int64, None, 1, "ValueError: boom from the generator"),
        (wrong_type, tf.int64, None, 0, (r"`generator` yielded an element that could "
         r"not be converted to the expected type. The expected type was int64, but the "
         r"yielded element was 'abc'.")),
        (wrong_shape, tf.int64, [3], 0, (r"`generator` yielded an element of shape "
         r"\(2,\) where an element of shape \(3,\) was expected.")),
        (wrong_structure, (tf.int64, tf.int64), None, 0, (r"`generator` yielded an element "
         r"that did not match the expected structure. The expected structure was "
         r"\(tf.int64, tf.int64\), but the yielded element was 1.")),
    ]
    for gen, types, shape, good, msg in cases:
        nxt = tf.data.Dataset.from_generator(gen, types, shape) \
            .make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            assert [int(sess.run(nxt)) for _ in range(good)] == [1] * good
            with pytest.raises(errors.InvalidArgumentError, match=msg):
                sess.run(nxt)
            with pytest.raises(errors.OutOfRangeError):  # a failed pipeline has ended
                sess.run(nxt)


def test_file_cache_is_written_by_a_full_pass_and_read_by_later_programs(tmp_path):
    import fsspec
    calls = []

    def counted(ds):
        return ds.map(lambda x: tf.py_func(lambda v: calls.append(1) or v, [x], tf.int64))

    def pipeline(url):
        def gen():  # one element a block; bytes that end in NUL bytes survive the files
            for i in range(6):
                yield i, b"r\x00%d\x00" % i, [i] * 3
        src = tf.data.Dataset.from_generator(gen, (tf.int64, tf.string, tf.int32),
                                             ([], [], [3]))
        return src.map(lambda i, s, v: (i, s, v, tf.as_string(i))).apply(
            lambda d: d.zip((counted(d.map(lambda i, *_: i)), d))).cache(url)
    want = [(i, (i, b"r\x00%d\x00" % i, [i] * 3, str(i))) for i in range(6)]

    def flat(got):
        return [(int(a), (int(b[0]), b[1], b[2].tolist(), b[3])) for a, b in got]
    url = "memory://tvm-cache-test/run"
    assert flat(elements(pipeline(url).take(2))) == want[:2]
    fs = fsspec.filesystem("memory")
    assert not fs.exists("/tvm-cache-test/run.index")  # a partial pass commits nothing
    assert not fs.exists("/tvm-cache-test/run.lockfile")
    assert flat(elements(pipeline(url).repeat(2))) == want * 2
    assert len(calls) == 2 + 6  # the second epoch came from the files
    with tf.Graph().as_default():  # a later program: the input is not read at all
        assert flat(elements(pipeline(url))) == want and len(calls) == 8
    local = str(tmp_path / "cache")
    assert as_lists(elements(tf.data.Dataset.range(3).cache(local))) == [0, 1, 2]
    assert as_lists(elements(tf.data.Dataset.range(9).cache(local))) == [0, 1, 2]  # as TF


def test_file_cache_refuses_a_concurrent_writer_and_a_corrupt_file():
    import fsspec
    fs = fsspec.filesystem("memory")
    a = tf.data.Dataset.range(5).cache("memory://tvm-cache-lock/c").make_one_shot_iterator()
    b = tf.data.Dataset.range(5).cache("memory://tvm-cache-lock/c").make_one_shot_iterator()
    na, nb = a.get_next(), b.get_next()
    with tf.Session() as sess:
        assert int(sess.run(na)) == 0  # a is writing
        with pytest.raises(errors.AlreadyExistsError, match="There appears to be a concurrent "
                           "caching iterator running - cache lockfile already exists"):
            sess.run(nb)
        assert [int(sess.run(na)) for _ in range(4)] == [1, 2, 3, 4]
        with pytest.raises(errors.OutOfRangeError):
            sess.run(na)
    data = [p for p in fs.ls("/tvm-cache-lock", detail=False) if p.endswith(".data")]
    fs.pipe(data[0], b"not an npy file")
    with pytest.raises(errors.DataLossError, match="cache file .* is corrupt"):
        elements(tf.data.Dataset.range(5).cache("memory://tvm-cache-lock/c"))


def ref_group_by_window(items, key, size):
    """TF's group_by_window with reduce_func = batch(all): full groups when they fill, then
    what is left in increasing key order."""
    out, groups = [], {}
    for v in items:
        g = groups.setdefault(key(v), [])
        g.append(v)
        if len(g) == size(key(v)):
            out.append((key(v), groups.pop(key(v))))
    return out + [(k, groups[k]) for k in sorted(groups)]


def test_group_by_window_matches_the_reference():
    x = tf.data.experimental
    rng = np.random.default_rng(4)
    for _ in range(6):
        items = rng.integers(0, 50, size=int(rng.integers(0, 30))).tolist()
        mod, size = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        ds = tf.data.Dataset.from_tensor_slices(np.array(items, np.int64)).apply(
            x.group_by_window(lambda v, m=mod: v % m,
                              lambda k, w: w.batch(100).map(lambda g: (k, g)),
                              window_size=size))
        got = [(int(kk), gg.tolist()) for kk, gg in elements(ds)] if items else []
        assert got == ref_group_by_window(items, lambda v, m=mod: v % m, lambda k, s=size: s)
    ds = tf.data.Dataset.range(10).apply(x.group_by_window(
        lambda v: 5 - v % 3, lambda k, w: w.batch(10), window_size_func=lambda k: k - 2))
    assert as_lists(elements(ds)) == [b for _, b in ref_group_by_window(
        list(range(10)), lambda v: 5 - v % 3, lambda k: k - 2)]  # as TF 2.21 gives it
    pairs = tf.data.Dataset.from_tensor_slices((["a", "b", "c", "d"], [1, 2, 1, 2])).apply(
        x.group_by_window(lambda s, k: tf.cast(k, tf.int64), lambda k, w: w.batch(2), 2))
    assert [(a.tolist(), b.tolist()) for a, b in elements(pairs)] == \
        [(["a", "c"], [1, 1]), (["b", "d"], [2, 2])]


def test_group_by_window_bad_inputs():
    x = tf.data.experimental
    r = tf.data.Dataset.range(10)
    with pytest.raises(ValueError, match="`key_func` must return a single tf.int64 scalar "
                                         "tensor. Got type=int32"):
        r.apply(x.group_by_window(lambda v: tf.cast(v, tf.int32), lambda k, w: w, 2))
    with pytest.raises(ValueError, match="Either the `window_size` argument or the "
                                         "`window_size_func` argument must be specified."):
        r.apply(x.group_by_window(lambda v: v, lambda k, w: w, 2, lambda k: k))
    with pytest.raises(TypeError, match="`reduce_func` must return a `Dataset` object"):
        r.apply(x.group_by_window(lambda v: v, lambda k, w: k, 2))
    with pytest.raises(errors.InvalidArgumentError, match="Window size must be greater than "
                                                          "zero, but got 0."):
        r.apply(x.group_by_window(lambda v: v, lambda k, w: w, 0))
    ds = r.apply(x.group_by_window(lambda v: v % 2, lambda k, w: w, window_size_func=lambda k:
                                   k - 1))
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                             match="Window size must be greater than zero, "
                                                   "but got -1."):
        sess.run(nxt)


def test_bucket_by_sequence_length_pads_each_bucket_like_tf():
    lengths = [3, 1, 5, 2, 7, 4, 6, 2, 1, 8]

    def gen():
        for n in lengths:
            yield [1] * n
    ds = tf.data.Dataset.from_generator(gen, tf.int64, [None])
    bucket = tf.data.experimental.bucket_by_sequence_length

    def run(**kw):
        return [b.tolist() for b in elements(ds.apply(bucket(
            lambda s: tf.shape(s)[0], [3, 6], [2, 2, 3], **kw)))]

    def padded(ns, width):
        return [[1] * n + [0] * (width - n) for n in ns]
    # each sequence as TF 2.21 gives it: buckets [-inf,3) [3,6) [6,inf) of 2, 2, 3
    want = [padded([3, 5], 5), padded([1, 2], 2), padded([2, 1], 2), padded([7, 6, 8], 8),
            padded([4], 4)]
    assert run() == want
    assert run(drop_remainder=True) == want[:-1]
    bounded = ds.apply(bucket(lambda s: tf.shape(s)[0], [3, 6, 9], [2, 2, 3, 1],
                              pad_to_bucket_boundary=True))
    assert [b.tolist() for b in elements(bounded)] == want[:-1] + [padded([4], 5)]
    with pytest.raises(errors.InvalidArgumentError, match="When pad_to_bucket_boundary=True, "
                       r"elements must have length < max\(bucket_boundaries\)."):
        run(pad_to_bucket_boundary=True)
    same = tf.data.Dataset.range(7).map(lambda v: tf.fill([2], v)).apply(bucket(
        lambda s: s[0], [4], [2, 3], no_padding=True))
    assert as_lists(elements(same)) == [[[0, 0], [1, 1]], [[2, 2], [3, 3]], [[4, 4], [5, 5],
                                                                             [6, 6]]]


def test_functions_returning_outer_tensors_and_inner_sizes_from_the_element():
    """A map returning an outer tensor as is, and a flat_map whose inner batch size is the
    element: both failed (the first named a node of the outer graph, the second checked the
    inner pipeline against the outer one's inputs)."""
    c = tf.placeholder(tf.int64, [])
    it = tf.data.Dataset.range(3).map(lambda v: (c, v)).make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        sess.run(it.initializer, {c: 7})
        assert [tuple(int(a) for a in sess.run(nxt)) for _ in range(3)] == \
            [(7, 0), (7, 1), (7, 2)]
    ds = tf.data.Dataset.range(1, 4).flat_map(lambda n: tf.data.Dataset.range(4).batch(n))
    assert as_lists(elements(ds)) == [[0], [1], [2], [3], [0, 1], [2, 3], [0, 1, 2], [3]]


def test_choose_and_sample_from_datasets():
    x = tf.data.experimental
    r = tf.data.Dataset.range
    choice = tf.data.Dataset.from_tensor_slices(tf.constant([0, 1, 1, 0, 1, 1, 0], tf.int64))
    # as TF 2.21 gives it: the choices of an ended input are skipped
    assert as_lists(elements(x.choose_from_datasets([r(0, 5), r(100, 103)], choice))) == \
        [0, 100, 101, 1, 102, 2]
    bad = tf.data.Dataset.from_tensor_slices(tf.constant([0, 2], tf.int64))
    with pytest.raises(errors.InvalidArgumentError, match="Selector index out of range: 2"):
        elements(x.choose_from_datasets([r(3), r(3)], bad))
    with pytest.raises(TypeError, match="`choice_dataset` must be a dataset of scalar "
                                        "`tf.int64` tensors"):
        x.choose_from_datasets([r(3)], tf.data.Dataset.from_tensor_slices([0]))
    with pytest.raises(TypeError, match="All datasets must have the same type and structure"):
        x.sample_from_datasets([r(3), tf.data.Dataset.from_tensor_slices([1.0])])
    a, b = np.arange(0, 3000), np.arange(10_000, 11_000)
    ds = x.sample_from_datasets([tf.data.Dataset.from_tensor_slices(a),
                                 tf.data.Dataset.from_tensor_slices(b)], [0.75, 0.25], seed=7)
    got = np.array(as_lists(elements(ds)))
    assert sorted(got.tolist()) == a.tolist() + b.tolist()  # every element once
    np.testing.assert_array_equal(got[got < 10_000], a)  # each input in its order
    assert abs((got[:2000] >= 10_000).mean() - 0.25) < 0.04  # the weights, while both last
    assert as_lists(elements(ds)) == got.tolist()  # a seed: the same draws
    only = x.sample_from_datasets([r(3), r(10, 12)], [1.0, 0.0], seed=1)
    assert as_lists(elements(only)) == [0, 1, 2]  # ends when no weighted input is left


def test_counter_cardinality_options():
    x = tf.data.experimental
    r = tf.data.Dataset.range
    assert as_lists(elements(x.Counter(3, 2).take(3))) == [3, 5, 7]
    assert as_lists(elements(x.Counter(0, -1, tf.int32).take(2))) == [0, -1]
    cases = [(r(10).batch(3), 4), (r(10).batch(3, drop_remainder=True), 3),
             (r(10).repeat(), x.INFINITE_CARDINALITY), (r(10).repeat(3).skip(4), 26),
             (r(10).filter(lambda v: v > 1), x.UNKNOWN_CARDINALITY),
             (r(10).filter(lambda v: v > 1).repeat(), x.INFINITE_CARDINALITY),
             (r(10).repeat().take(4), 4), (r(10).shard(3, 1), 3),
             (tf.data.Dataset.zip((r(4), r(9))), 4), (r(4).concatenate(r(5)).map(
                 lambda v: v + 1), 9), (r(7).window(3, 2, 1, True), 3),
             (r(7).window(3, 2), 4), (tf.data.Dataset.from_tensor_slices(np.zeros((6, 2))), 6)]
    got = [x.cardinality(d) for d, _ in cases]
    with tf.Session() as sess:
        assert [int(v) for v in sess.run(got)] == [n for _, n in cases]
    opts = tf.data.Options()
    opts.experimental_deterministic = False
    opts.experimental_threading.private_threadpool_size = 4
    ds = tf.data.Dataset.zip((r(3).with_options(opts).map(lambda v: v * 2), r(3)))
    assert ds.options().experimental_deterministic is False  # TF: inputs' options merge
    assert r(3).options().experimental_deterministic is None
    kept = r(3).with_options(opts)
    assert kept.options().experimental_threading.private_threadpool_size == 4
    assert as_lists(elements(kept)) == [0, 1, 2]
    with pytest.raises(TypeError, match="expected a tf.data.Options"):
        r(3).with_options({"x": 1})


def test_zlib_text_lines_and_num_parallel_reads_interleave_files_like_tf():
    import zlib

    import fsspec
    fs = fsspec.filesystem("memory")
    fs.pipe("/tvm-data-par/z.txt", zlib.compress(b"a\nb\n"))
    ds = tf.data.TextLineDataset("memory://tvm-data-par/z.txt", compression_type="ZLIB")
    assert [str(s) for s in elements(ds)] == ["a", "b"]
    fs.pipe("/tvm-data-par/bad.txt", b"not zlib")
    with pytest.raises(errors.DataLossError, match="corrupt ZLIB stream"):
        elements(tf.data.TextLineDataset("memory://tvm-data-par/bad.txt", "ZLIB"))
    files = []
    for k, n in enumerate((3, 1, 4)):
        url = f"memory://tvm-data-par/p{k}.tfrecord"
        with tf.python_io.TFRecordWriter(url) as w:
            for i in range(n):
                w.write(b"%d-%d" % (k, i))
        files.append(url)
        fs.pipe(f"/tvm-data-par/p{k}.txt", b"".join(b"%d-%d\n" % (k, i) for i in range(n)))
    # as TF 2.21 orders them: two files at a time, one record from each in turn; an ended
    # file's turn passes to the next (the new file is opened on its slot's next turn)
    want = ["0-0", "1-0", "0-1", "0-2", "2-0", "2-1", "2-2", "2-3"]
    got = elements(tf.data.TFRecordDataset(files, num_parallel_reads=2))
    assert [g.decode() for g in got] == want
    texts = [f.replace(".tfrecord", ".txt") for f in files]
    assert [str(s) for s in elements(tf.data.TextLineDataset(texts, num_parallel_reads=2))] \
        == want
    assert [g.decode() for g in elements(tf.data.TFRecordDataset(files))] == sorted(want)


CSV_A = ("survived,sex,age,fare,big,name\n0,male,22,7.25,3000000000,Owen\n"
         '1,female,38,71.2833,1,"Cumings, Mrs"\n1,female,,7.925,2,Laina\n')
CSV_B = "survived,sex,age,fare,big,name\n1,female,35,53.1,4,Lily\n0,male,35,8.05,5,Will\n"


def _csv_files(tmp_path):
    (tmp_path / "a.csv").write_text(CSV_A)
    (tmp_path / "b.csv").write_text(CSV_B)
    return str(tmp_path / "*.csv")


def test_make_csv_dataset_infers_names_and_types_and_batches_like_tf(tmp_path):
    import csv
    pattern = _csv_files(tmp_path)
    ds = tf.data.experimental.make_csv_dataset(pattern, 2, label_name="survived",
                                               shuffle=False, num_epochs=1)
    feats, label = ds.output_types
    # the types TF 2.21 infers: int32, then int64 for a value past int32, float32, string
    assert feats == {"sex": tf.string, "age": tf.int32, "fare": tf.float32, "big": tf.int64,
                     "name": tf.string} and label == tf.int32
    rows = [r for f in ("a.csv", "b.csv") for r in csv.DictReader(
        (tmp_path / f).read_text().splitlines())]
    got = elements(ds)
    assert [len(lb) for _, lb in got] == [2, 2, 1]  # num_epochs=1 keeps the remainder
    flat = {k: [v for f, _ in got for v in f[k].tolist()] for k in feats}
    assert flat["name"] == [r["name"] for r in rows]
    assert flat["age"] == [int(r["age"] or 0) for r in rows]  # a missing value: 0
    np.testing.assert_allclose(flat["fare"], [float(r["fare"]) for r in rows], rtol=1e-6)
    assert flat["big"] == [int(r["big"]) for r in rows]
    assert [v for _, lb in got for v in lb.tolist()] == [int(r["survived"]) for r in rows]
    # two epochs, two columns by name, no label; num_epochs=None drops the remainder (TF)
    ds = tf.data.experimental.make_csv_dataset(pattern, 3, select_columns=["name", "age"],
                                               shuffle=False, num_epochs=2)
    got = elements(ds)
    assert [g["name"].tolist() for g in got] == \
        [["Owen", "Cumings, Mrs", "Laina"], ["Lily", "Will", "Owen"],
         ["Cumings, Mrs", "Laina", "Lily"], ["Will"]]
    ds = tf.data.experimental.make_csv_dataset(pattern, 4, shuffle=True, shuffle_seed=3)
    first = elements(ds.take(5))
    assert all(len(f["name"]) == 4 for f in first)  # endless, full batches only
    names = sorted(v for f in first[:1] for v in f["name"].tolist())
    assert set(names) <= {r["name"] for r in rows}


def test_csv_dataset_and_make_csv_dataset_errors(tmp_path):
    pattern = _csv_files(tmp_path)
    ds = tf.data.experimental.CsvDataset(str(tmp_path / "a.csv"),
                                         [tf.int32, "x", [0.0], tf.float32, tf.int64,
                                          tf.string], header=True)
    got = elements(ds)
    assert [(int(a), str(b), float(c)) for a, b, c, *_ in got] == \
        [(0, "male", 22.0), (1, "female", 38.0), (1, "female", 0.0)]
    sel = tf.data.experimental.CsvDataset(str(tmp_path / "b.csv"), [[0], [""]], header=True,
                                          select_cols=[0, 5])
    assert [(int(a), str(b)) for a, b in elements(sel)] == [(1, "Lily"), (0, "Will")]
    bad = tf.data.experimental.CsvDataset(str(tmp_path / "a.csv"),
                                          [[0], [""], [0.0], [0.0], [0], [""]], header=True)
    with pytest.raises(errors.InvalidArgumentError, match="Field 4 in record 0 is not a valid "
                                                          "int32: 3000000000"):
        elements(bad)  # TF's message
    mk = tf.data.experimental.make_csv_dataset
    with pytest.raises(ValueError, match="`label_name` provided must be one of the columns."):
        mk(pattern, 2, label_name="nope")
    with pytest.raises(ValueError, match="Cannot infer column names without a header line."):
        mk(pattern, 2, header=False)
    with pytest.raises(ValueError, match="Cannot have duplicate column names."):
        mk(pattern, 2, column_names=["a", "a", "b", "c", "d", "e"])
    with pytest.raises(ValueError, match="No files match"):
        mk(str(tmp_path / "none-*.csv"), 2)
    (tmp_path / "c.csv").write_text("other,cols\n1,2\n")
    with pytest.raises(ValueError, match="Files have different column names in the header "
                                         "row."):
        mk(str(tmp_path / "*.csv"), 2)


def test_csv_type_inference_follows_tfs_rules():
    from tensorvm.ops.data.dataset_csv import infer_type
    cases = [("1", None, tf.int32), ("3000000000", tf.int32, tf.int64), ("1.5", tf.int64,
             tf.float32), ("1e300", tf.float32, tf.float64), ("x", tf.float64, tf.string),
             ("", tf.int64, tf.int64), ("NA", tf.float32, tf.float32), ("2", tf.float32,
                                                                        tf.float32)]
    assert [infer_type(v, "NA", prev) for v, prev, _ in cases] == [w for *_, w in cases]


def test_tfrecord_writer_writes_a_dataset_read_back_by_tfrecord_dataset():
    recs = [b"r%d\x00" % i for i in range(5)]
    for comp in (None, "GZIP", "ZLIB"):
        url = f"memory://tvm-data-writer/out-{comp}.tfrecord"
        ds = tf.data.Dataset.from_tensor_slices(np.array(recs, dtype=object)).map(
            lambda r: tf.strings.join([r, "!"]))
        op = tf.data.experimental.TFRecordWriter(url, comp).write(ds)
        with tf.Session() as sess:
            assert sess.run(op) is None
        back = elements(tf.data.TFRecordDataset(url, compression_type=comp))
        assert [bytes(b) for b in back] == [r + b"!" for r in recs]
    with pytest.raises(TypeError, match="`dataset` must produce scalar `DT_STRING` tensors"):
        tf.data.experimental.TFRecordWriter("memory://x").write(tf.data.Dataset.range(3))


def test_group_by_reducer_folds_each_key_and_emits_in_key_order():
    x = tf.data.experimental
    count = x.Reducer(init_func=lambda k: k * 1000, reduce_func=lambda s, v: s + 1,
                      finalize_func=lambda s: s)
    for keys in ([9, 2, 7, 0, 100, -5, 2], list(range(40, 0, -3))):
        ds = tf.data.Dataset.from_tensor_slices(tf.constant(keys, tf.int64)).apply(
            x.group_by_reducer(lambda v: v, count))
        want = [k * 1000 + keys.count(k) for k in sorted(set(keys))]  # TF's order: by key
        assert as_lists(elements(ds)) == want
    collect = x.Reducer(init_func=lambda k: (k, tf.zeros([0], tf.int64)),
                        reduce_func=lambda s, v: (s[0], tf.concat([s[1], [v]], 0)),
                        finalize_func=lambda k, v: {"k": k, "v": v})
    ds = tf.data.Dataset.range(7).apply(x.group_by_reducer(lambda v: v % 3, collect))
    assert ds.output_shapes["v"].as_list() == [None]  # the state's shape was relaxed
    assert [(int(e["k"]), e["v"].tolist()) for e in elements(ds)] == \
        [(0, [0, 3, 6]), (1, [1, 4]), (2, [2, 5])]  # as TF 2.21 gives it
    with pytest.raises(TypeError, match="must be a tf.data.experimental.Reducer"):
        tf.data.Dataset.range(3).apply(x.group_by_reducer(lambda v: v, lambda s: s))
    with pytest.raises(TypeError, match="The element types for the new state must match"):
        tf.data.Dataset.range(3).apply(x.group_by_reducer(lambda v: v, x.Reducer(
            lambda k: k, lambda s, v: tf.cast(s, tf.float32), lambda s: s)))


# ---- get_next_as_optional / tf.data.experimental.Optional -------------------------------------

def test_get_next_as_optional_reads_one_element_per_run_and_ends_empty():
    it = tf.data.Dataset.range(2).map(lambda x: (x, tf.fill([x], 1.0))) \
        .make_initializable_iterator()
    opt = tf.data.experimental.get_next_as_optional(it)
    has, val = opt.has_value(), opt.get_value()
    assert has.dtype == tf.bool and [v.shape.as_list() for v in val] == [[], [None]]
    assert opt.output_types == (tf.int64, tf.float32)
    with tf.Session() as s:
        s.run(it.initializer)
        assert [bool(s.run(has)) for _ in range(3)] == [True, True, False]
        s.run(it.initializer)
        h, (i, f) = s.run([has, val])  # one element for both
        assert bool(h) and int(i) == 0 and f.tolist() == []
        i, f = s.run(val)
        assert int(i) == 1 and f.tolist() == [1.0]
        with pytest.raises(errors.InvalidArgumentError,
                           match="The given optional does not have a value."):
            s.run(val)
        assert not s.run(has)


def test_iterator_get_next_as_optional_of_a_one_shot_iterator_with_sparse_elements():
    it = tf.data.Dataset.from_tensor_slices(
        tf.SparseTensor([[0, 1]], [5], [2, 3])).make_one_shot_iterator()
    opt = it.get_next_as_optional()
    has, val = opt.has_value(), opt.get_value()
    assert isinstance(val, tf.SparseTensor) and opt.output_classes is tf.SparseTensor
    with tf.Session() as s:
        got = [s.run([has, val]) for _ in range(2)]
        assert [bool(h) for h, _ in got] == [True, True]
        assert [v.values.tolist() for _, v in got] == [[5], []]
        assert got[0][1].indices.tolist() == [[1]] and got[1][1].dense_shape.tolist() == [3]
        assert not s.run(has)


def test_optional_from_value_and_empty():
    opt = tf.data.experimental.Optional.from_value(
        {"a": tf.constant(1), "b": tf.SparseTensor([[0]], [1.0], [3])})
    assert opt.output_classes == {"a": tf.Tensor, "b": tf.SparseTensor}
    none = tf.data.experimental.Optional.empty(tf.zeros([2], tf.int32))
    with tf.Session() as s:
        h, v = s.run([opt.has_value(), opt.get_value()])
        assert bool(h) and int(v["a"]) == 1 and v["b"].values.tolist() == [1.0]
        assert not s.run(none.has_value())
        with pytest.raises(errors.InvalidArgumentError, match="does not have a value"):
            s.run(none.get_value())


def test_parse_single_example_with_sequence_features_then_padded_batch():
    """TF 1.x's variable-length dense features: FixedLenSequenceFeature per example, then
    padded_batch (the shapes TF 2.21 gives)."""
    def ex(vals):
        return tf.train.Example(features=tf.train.Features(feature={"v": tf.train.Feature(
            int64_list=tf.train.Int64List(value=vals))})).SerializeToString()
    feats = {"v": tf.io.FixedLenSequenceFeature([2], tf.int64, allow_missing=True)}
    ds = tf.data.Dataset.from_tensor_slices([ex([1, 2, 3, 4]), ex([5, 6]), ex([])]) \
        .map(lambda r: tf.parse_single_example(r, feats))
    assert ds.output_shapes["v"].as_list() == [None, 2]
    b = ds.padded_batch(2, padded_shapes={"v": [None, 2]}, padding_values={"v": tf.constant(
        -1, tf.int64)})
    assert [e["v"].tolist() for e in elements(b)] == [[[[1, 2], [3, 4]], [[5, 6], [-1, -1]]],
                                                      [[]]]
