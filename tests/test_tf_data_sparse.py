"""SparseTensor components in ``tv.data`` (TF 1.x's ``SparseTensorSpec`` elements): sources,
map/filter/batch/unbatch and the row-moving transformations, iterators, and TF 1.15's
``output_types``/``output_shapes``/``output_classes``. Expected values are TF 2.21's
(``tf.compat.v1``) on the same programs, written out; errors by class and message."""
import numpy as np
import pytest
import tensorvm as tf

SP = {"indices": [[0, 1], [2, 0], [2, 2]], "values": [1., 2., 3.], "dense_shape": [4, 3]}


def drain(sess, nxt, limit=1000):
    out = []
    while True:
        try:
            out.append(sess.run(nxt))
        except tf.errors.OutOfRangeError:
            return out
        assert len(out) < limit


def elements(ds):
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        return drain(sess, nxt)


def triple(v):
    """A SparseTensorValue as plain lists."""
    assert isinstance(v, tf.SparseTensorValue)
    assert v.indices.dtype == np.int64 and v.dense_shape.dtype == np.int64
    return (v.indices.tolist(), v.values.tolist(), v.dense_shape.tolist())


def _example(vals):
    return tf.train.Example(features=tf.train.Features(feature={
        "v": tf.train.Feature(int64_list=tf.train.Int64List(value=vals)),
        "l": tf.train.Feature(float_list=tf.train.FloatList(value=[len(vals)]))})
    ).SerializeToString()


def parsed():
    recs = [_example([1, 2]), _example([]), _example([5, 6, 7])]
    return tf.data.Dataset.from_tensor_slices(recs).map(
        lambda r: tf.parse_single_example(r, {"v": tf.VarLenFeature(tf.int64),
                                              "l": tf.FixedLenFeature([1], tf.float32)}))


# ---- sources ----------------------------------------------------------------------------------

def test_from_tensor_slices_of_a_sparse_tensor_gives_its_rows_empty_ones_included():
    ds = tf.data.Dataset.from_tensor_slices(tf.SparseTensor(**SP))
    assert ds.output_types == tf.float32
    assert ds.output_shapes.as_list() == [3]
    assert ds.output_classes is tf.SparseTensor
    got = elements(ds)
    assert [triple(v) for v in got] == [([[1]], [1.0], [3]), ([], [], [3]),
                                        ([[0], [2]], [2.0, 3.0], [3]), ([], [], [3])]
    assert got[1].indices.shape == (0, 1) and got[0].values.dtype == np.float32


def test_from_tensor_slices_of_a_sparse_tensor_value_and_a_tuple_with_dense():
    ds = tf.data.Dataset.from_tensor_slices((tf.SparseTensorValue(**SP), np.arange(4)))
    assert ds.output_classes == (tf.SparseTensor, tf.Tensor)
    got = elements(ds)
    assert [(triple(s), int(d)) for s, d in got][2] == (([[0], [2]], [2.0, 3.0], [3]), 2)
    assert len(got) == 4


def test_from_tensors_of_a_sparse_tensor_is_one_element():
    ds = tf.data.Dataset.from_tensors(tf.SparseTensor(**SP))
    assert ds.output_shapes.as_list() == [4, 3]
    assert [triple(v) for v in elements(ds)] == [(SP["indices"], SP["values"], [4, 3])]


def test_from_sparse_tensor_slices_gives_index_value_shape_triples():
    ds = tf.data.Dataset.from_sparse_tensor_slices(tf.SparseTensor(**SP))
    assert ds.output_types == (tf.int64, tf.float32, tf.int64)
    assert [s.as_list() for s in ds.output_shapes] == [[None, 1], [None], [1]]
    assert ds.output_classes == (tf.Tensor, tf.Tensor, tf.Tensor)
    got = [tuple(np.asarray(x).tolist() for x in e) for e in elements(ds)]
    assert got == [([[1]], [1.0], [3]), ([], [], [3]), ([[0], [2]], [2.0, 3.0], [3]),
                   ([], [], [3])]


def test_a_sparse_placeholder_fed_to_an_initializable_iterator():
    p = tf.sparse_placeholder(tf.int64, shape=[None, None])
    it = tf.data.Dataset.from_tensor_slices(p).map(tf.sparse.reduce_sum) \
        .make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as s:
        s.run(it.initializer, {p: tf.SparseTensorValue([[0, 0], [0, 3], [1, 1]], [1, 2, 5],
                                                       [3, 4])})
        assert [int(x) for x in drain(s, nxt)] == [3, 5, 0]


# ---- map and filter ---------------------------------------------------------------------------

def test_map_returning_parse_single_example_with_a_varlen_feature():
    ds = parsed()
    assert ds.output_types == {"l": tf.float32, "v": tf.int64}
    assert ds.output_shapes["v"].as_list() == [None] and ds.output_shapes["l"].as_list() == [1]
    assert ds.output_classes == {"l": tf.Tensor, "v": tf.SparseTensor}
    got = elements(ds)
    assert [triple(e["v"]) for e in got] == [([[0], [1]], [1, 2], [2]), ([], [], [0]),
                                             ([[0], [1], [2]], [5, 6, 7], [3])]
    assert [e["l"].tolist() for e in got] == [[2.0], [0.0], [3.0]]


def test_batch_stacks_sparse_components_with_the_largest_dense_shape():
    ds = parsed().batch(2)
    assert ds.output_shapes["v"].as_list() == [None, None]
    got = elements(ds)
    assert triple(got[0]["v"]) == ([[0, 0], [0, 1]], [1, 2], [2, 2])
    assert got[0]["l"].tolist() == [[2.0], [0.0]]
    assert triple(got[1]["v"]) == ([[0, 0], [0, 1], [0, 2]], [5, 6, 7], [1, 3])
    assert len(got) == 2


def test_batch_of_rows_and_drop_remainder_shapes():
    ds = tf.data.Dataset.from_tensor_slices(tf.SparseTensor(**SP))
    assert ds.batch(3).output_shapes.as_list() == [None, 3]
    assert ds.batch(3, drop_remainder=True).output_shapes.as_list() == [3, 3]
    got = elements(ds.batch(3))
    assert [triple(v) for v in got] == [([[0, 1], [2, 0], [2, 2]], [1., 2., 3.], [3, 3]),
                                        ([], [], [1, 3])]
    assert got[1].indices.shape == (0, 2)
    assert len(elements(ds.batch(3, drop_remainder=True))) == 1


def test_batch_of_elements_whose_dense_shapes_differ():
    ds = tf.data.Dataset.range(4).map(
        lambda i: tf.SparseTensor([[0]], [i], tf.reshape(i + 1, [1])))
    got = elements(ds.batch(3))
    assert [triple(v) for v in got] == [([[0, 0], [1, 0], [2, 0]], [0, 1, 2], [3, 3]),
                                        ([[0, 0]], [3], [1, 4])]


def test_batch_of_sparse_elements_of_different_ranks_fails():
    a = tf.data.Dataset.from_tensors(tf.SparseTensor([[0]], [1.], [3]))
    b = tf.data.Dataset.from_tensors(tf.SparseTensor([[0, 0]], [1.], [3, 3])) \
        .map(lambda x: tf.sparse.reshape(x, [9]))
    ds = a.concatenate(b.map(lambda x: tf.SparseTensor(
        tf.concat([x.indices, x.indices], 1), x.values, tf.concat([x.dense_shape, [1]], 0))))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Cannot add tensor to the batch"):
        elements(ds.batch(2))


def test_map_of_a_sparse_element_and_static_shapes_carried():
    ds = tf.data.Dataset.from_tensor_slices(tf.SparseTensor([[0, 0, 0]], [1], [2, 2, 2]))
    m = ds.map(lambda x: (x, tf.sparse.to_dense(x)))
    assert [s.as_list() for s in m.output_shapes] == [[2, 2], [2, 2]]
    assert m.map(lambda s, d: s).batch(2, drop_remainder=True).output_shapes.as_list() \
        == [2, 2, 2]
    got = elements(m)
    assert triple(got[0][0]) == ([[0, 0]], [1], [2, 2])
    assert got[0][1].tolist() == [[1, 0], [0, 0]] and got[1][1].tolist() == [[0, 0], [0, 0]]


def test_map_returning_a_constant_sparse_tensor_value():
    ds = tf.data.Dataset.range(2).map(lambda i: (i, tf.SparseTensorValue([[1]], [7], [2])))
    assert ds.output_shapes[1].as_list() == [2]
    assert [(int(i), triple(s)) for i, s in elements(ds)] == [(0, ([[1]], [7], [2])),
                                                              (1, ([[1]], [7], [2]))]


def test_filter_on_a_sparse_component():
    ds = parsed().filter(lambda d: tf.size(d["v"].values) > 0)
    assert [triple(e["v"])[1] for e in elements(ds)] == [[1, 2], [5, 6, 7]]


def test_flat_map_reads_a_sparse_element():
    ds = tf.data.Dataset.from_tensors(tf.SparseTensor(**SP)).flat_map(
        lambda s: tf.data.Dataset.from_tensor_slices(s.values))
    assert [float(x) for x in elements(ds)] == [1.0, 2.0, 3.0]


# ---- unbatch and the row-moving transformations -----------------------------------------------

def test_unbatch_inverts_batch():
    ds = tf.data.Dataset.from_tensor_slices(tf.SparseTensor(**SP)).batch(3).unbatch()
    assert ds.output_shapes.as_list() == [3]
    assert [triple(v) for v in elements(ds)] == [([[1]], [1.0], [3]), ([], [], [3]),
                                                 ([[0], [2]], [2.0, 3.0], [3]), ([], [], [3])]


def test_unbatch_of_sparse_and_dense_components():
    ds = tf.data.Dataset.from_tensors((tf.SparseTensor(**SP), tf.range(4))).unbatch()
    got = elements(ds)
    assert [(triple(s)[1], int(d)) for s, d in got] == [([1.0], 0), ([], 1), ([2.0, 3.0], 2),
                                                       ([], 3)]
    bad = tf.data.Dataset.from_tensors((tf.SparseTensor(**SP), tf.range(3))).unbatch()
    with pytest.raises(tf.errors.InvalidArgumentError, match="same batch size"):
        elements(bad)


def test_shuffle_repeat_take_skip_prefetch_shard_cache_move_sparse_rows():
    ds = tf.data.Dataset.from_tensor_slices((tf.SparseTensor(**SP), np.arange(4)))
    out = elements(ds.shuffle(4, seed=3).repeat(2).skip(1).take(6).prefetch(2))
    assert len(out) == 6
    for s, i in out:  # each row still with its own index
        assert triple(s) == [([[1]], [1.0], [3]), ([], [], [3]), ([[0], [2]], [2.0, 3.0], [3]),
                             ([], [], [3])][int(i)]
    assert [int(i) for _, i in elements(ds.shard(2, 1).cache().repeat(2))] == [1, 3, 1, 3]


def test_zip_of_a_sparse_dataset_and_a_range_batched():
    z = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices(tf.SparseTensor(**SP)),
                             tf.data.Dataset.range(10)))
    assert z.output_classes == (tf.SparseTensor, tf.Tensor)
    got = elements(z.batch(2))
    assert triple(got[1][0]) == ([[0, 0], [0, 2]], [2.0, 3.0], [2, 3])
    assert got[1][1].tolist() == [2, 3]


def test_padded_batch_refuses_sparse_components_as_tf():
    ds = tf.data.Dataset.from_tensor_slices(tf.SparseTensor(**SP))
    with pytest.raises(TypeError, match=r"`padded_batch` is only supported for datasets that "
                       r"produce tensor elements.*SparseTensorSpec\(TensorShape\(\[3\]\), "
                       r"tf.float32\)"):
        ds.padded_batch(2, padded_shapes=[3])


def test_transformations_without_sparse_support_say_so():
    ds = tf.data.Dataset.from_tensors(tf.SparseTensor(**SP))
    with pytest.raises(TypeError, match="a SparseTensor in the state is not supported"):
        ds.reduce(tf.constant(0.), lambda s, x: x)


def test_reduce_scan_take_while_and_get_single_element_of_sparse_elements():
    sp = tf.SparseTensor([[0, 1], [1, 0]], [1, 2], [2, 3])
    rows = tf.data.Dataset.from_tensor_slices(sp)
    total = rows.reduce(tf.constant(0, tf.int32), lambda s, x: s + tf.sparse.reduce_sum(x))
    scanned = rows.apply(tf.data.experimental.scan(
        tf.constant(0, tf.int32),
        lambda s, x: (s + 1, tf.SparseTensor(x.indices, x.values + s, x.dense_shape))))
    assert scanned.output_classes is tf.SparseTensor and scanned.output_shapes.as_list() == [3]
    single = tf.data.experimental.get_single_element(tf.data.Dataset.from_tensors(sp))
    assert isinstance(single, tf.SparseTensor) and single.shape.as_list() == [2, 3]
    first = rows.apply(tf.data.experimental.take_while(
        lambda x: tf.reduce_all(tf.equal(x.indices[:, 0], 1))))
    with tf.Session() as s:
        assert int(s.run(total)) == 3
        assert triple(s.run(single)) == ([[0, 1], [1, 0]], [1, 2], [2, 3])
    assert [triple(v) for v in elements(scanned)] == [([[1]], [1], [3]), ([[0]], [3], [3])]
    assert [triple(v) for v in elements(first)] == [([[1]], [1], [3])]


# ---- iterators --------------------------------------------------------------------------------

def test_get_next_is_a_sparse_tensor_with_the_static_shape():
    it = tf.data.Dataset.from_tensor_slices(tf.SparseTensor(**SP)).make_one_shot_iterator()
    assert it.output_classes is tf.SparseTensor
    nxt = it.get_next()
    assert isinstance(nxt, tf.SparseTensor) and nxt.shape.as_list() == [3]
    assert nxt.indices.dtype == tf.int64 and nxt.values.dtype == tf.float32
    with tf.Session() as s:
        assert triple(s.run(nxt)) == ([[1]], [1.0], [3])
        assert s.run(tf.sparse.to_dense(nxt)).tolist() == [0.0, 0.0, 0.0]


def test_from_structure_with_output_classes_and_make_initializer():
    it = tf.data.Iterator.from_structure(tf.float32, tf.TensorShape([3]),
                                         output_classes=tf.SparseTensor)
    assert it.output_classes is tf.SparseTensor
    init = it.make_initializer(tf.data.Dataset.from_tensor_slices(tf.SparseTensor(**SP)))
    nxt = it.get_next()
    with tf.Session() as s:
        s.run(init)
        assert triple(s.run(nxt)) == ([[1]], [1.0], [3])
    with pytest.raises(TypeError, match="Expected output classes"):
        it.make_initializer(tf.data.Dataset.from_tensor_slices(tf.zeros([4, 3])))


def test_feedable_iterator_of_sparse_elements():
    ds = tf.data.Dataset.from_tensor_slices(tf.SparseTensor(**SP))
    it = ds.make_one_shot_iterator()
    h = tf.placeholder(tf.string, [])
    feed = tf.data.Iterator.from_string_handle(h, ds.output_types, ds.output_shapes,
                                               ds.output_classes)
    nxt = feed.get_next()
    assert isinstance(nxt, tf.SparseTensor)
    with tf.Session() as s:
        handle = s.run(it.string_handle())
        assert [triple(s.run(nxt, {h: handle}))[1] for _ in range(3)] == [[1.0], [], [2.0, 3.0]]


def test_window_unique_and_grouping_refuse_sparse_components():
    ds = tf.data.Dataset.from_tensor_slices(tf.SparseTensor(**SP))
    for make in (lambda: ds.window(2), lambda: ds.unique(),
                 lambda: ds.apply(tf.data.experimental.group_by_window(
                     lambda x: tf.constant(0, tf.int64), lambda k, w: w, 2))):
        with pytest.raises(TypeError, match="SparseTensor components"):
            make()


# ---- on a cluster of worker processes ---------------------------------------------------------

TV_CLUSTER = {"ps": 1, "worker": 1}
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state


@pytest.mark.cluster
def test_sparse_elements_are_read_in_a_worker_process(cluster):
    """The sparse stages (SparseArgs, sparse slices, stacking) travel to a worker; the three
    tensors of get_next are consumed on another device."""
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            nxt = parsed().batch(2).make_one_shot_iterator().get_next()
        with tf.device("/job:worker/task:0"):
            dense = tf.sparse.to_dense(nxt["v"])
    s = cluster.session(graph)
    v, d = s.run([nxt["v"], dense])
    assert triple(v) == ([[0, 0], [0, 1]], [1, 2], [2, 2])
    assert d.tolist() == [[1, 2], [0, 0]]
    assert s.run(dense).tolist() == [[5, 6, 7]]


# ---- tf.data.experimental.dense_to_sparse_batch -----------------------------------------------

def _ragged():
    return tf.data.Dataset.from_tensor_slices([[1, 2, 0], [3, 0, 0], [4, 5, 6]]).map(
        lambda r: tf.boolean_mask(r, r > 0))


def test_dense_to_sparse_batch_against_tf():
    ds = _ragged().apply(tf.data.experimental.dense_to_sparse_batch(2, [4]))
    assert ds.output_classes is tf.SparseTensor and ds.output_types == tf.int32
    assert ds.output_shapes.as_list() == [None, 4]
    assert [triple(v) for v in elements(ds)] == [
        ([[0, 0], [0, 1], [1, 0]], [1, 2, 3], [2, 4]),
        ([[0, 0], [0, 1], [0, 2]], [4, 5, 6], [1, 4])]
    big = _ragged().apply(tf.data.experimental.dense_to_sparse_batch(3, [None]))
    assert big.output_shapes.as_list() == [None, None]
    assert triple(elements(big)[0])[2] == [3, 3]
    # every entry of a dense element, zeros included
    two = tf.data.Dataset.from_tensor_slices(tf.constant([[[1, 0], [0, 2]]])).apply(
        tf.data.experimental.dense_to_sparse_batch(2, [3, 3]))
    assert triple(elements(two)[0]) == ([[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1]],
                                        [1, 0, 0, 2], [1, 3, 3])


def test_dense_to_sparse_batch_errors_as_tf():
    small = _ragged().apply(tf.data.experimental.dense_to_sparse_batch(3, [2]))
    with pytest.raises(tf.errors.DataLossError, match=r"Input element had shape \(\[3\]\) that "
                       r"is larger than the row shape \(\[2\]\)\."):
        elements(small)
    rank = _ragged().apply(tf.data.experimental.dense_to_sparse_batch(2, [2, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Input element had shape "
                       r"\(\[2\]\) that is incompatible with the row shape \(\[2,2\]\)\."):
        elements(rank)
    with pytest.raises(TypeError, match=r"requires an input dataset whose elements have a "
                       r"single component.*\(tf.int64, tf.int64\)"):
        tf.data.Dataset.range(3).map(lambda x: (x, x)).apply(
            tf.data.experimental.dense_to_sparse_batch(2, [2]))


# ---- make_batched_features_dataset / parse_example_dataset ------------------------------------

def _record_files(tmp_path):
    for k in range(2):
        with tf.python_io.TFRecordWriter(str(tmp_path / f"part-{k}.tfrecord")) as w:
            for i in range(5):
                n = 10 * k + i
                w.write(tf.train.Example(features=tf.train.Features(feature={
                    "ids": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=list(range(n % 3)))),
                    "y": tf.train.Feature(float_list=tf.train.FloatList(value=[n])),
                    "s": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a%d" % n]))})
                ).SerializeToString())
    return str(tmp_path / "part-*.tfrecord")


FEATS = {"ids": tf.VarLenFeature(tf.int64), "y": tf.FixedLenFeature([], tf.float32),
         "s": tf.FixedLenFeature([1], tf.string)}


def test_make_batched_features_dataset_in_tf_order(tmp_path):
    ds = tf.data.experimental.make_batched_features_dataset(
        _record_files(tmp_path), 4, FEATS, label_key="y", shuffle=False, num_epochs=1,
        reader_num_threads=2)
    shapes = ds.output_shapes
    assert shapes[0]["ids"].as_list() == [None, None] and shapes[0]["s"].as_list() == [None, 1]
    assert shapes[1].as_list() == [None]
    assert ds.output_classes == ({"ids": tf.SparseTensor, "s": tf.Tensor}, tf.Tensor)
    got = [(y.tolist(), triple(f["ids"]), [x.decode() for x in f["s"].ravel()])
           for f, y in elements(ds)]
    assert got == [  # the two files a record from each in turn, as TF 2.21
        ([0.0, 10.0, 1.0, 11.0], ([[1, 0], [2, 0], [3, 0], [3, 1]], [0, 0, 0, 1], [4, 2]),
         ["a0", "a10", "a1", "a11"]),
        ([2.0, 12.0, 3.0, 13.0], ([[0, 0], [0, 1], [3, 0]], [0, 1, 0], [4, 2]),
         ["a2", "a12", "a3", "a13"]),
        ([4.0, 14.0], ([[0, 0], [1, 0], [1, 1]], [0, 0, 1], [2, 2]), ["a4", "a14"])]


def test_make_batched_features_dataset_endless_and_shuffled(tmp_path):
    ds = tf.data.experimental.make_batched_features_dataset(
        _record_files(tmp_path), 3, FEATS, shuffle=True, shuffle_seed=3)
    assert ds.output_shapes["ids"].as_list() == [3, None]  # static batch: remainder dropped
    assert ds.output_shapes["y"].as_list() == [3]
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as s:
        got = sorted(v for _ in range(10) for v in s.run(nxt)["y"].tolist())
    assert got == sorted([float(n) for n in (0, 1, 2, 3, 4, 10, 11, 12, 13, 14)] * 3)


def test_make_batched_features_dataset_errors(tmp_path):
    pattern = _record_files(tmp_path)
    with pytest.raises(ValueError, match=r"The `label_key` provided \(nope\) must be one of "
                                         r"the `features` keys"):
        tf.data.experimental.make_batched_features_dataset(pattern, 3, FEATS, label_key="nope")
    with pytest.raises(TypeError, match="`tf.ReaderBase` subclasses are not supported"):
        tf.data.experimental.make_batched_features_dataset(pattern, 3, FEATS,
                                                           reader=tf.TFRecordReader)


def test_parse_example_dataset_of_batches(tmp_path):
    _record_files(tmp_path)
    ds = tf.data.TFRecordDataset(str(tmp_path / "part-0.tfrecord")).batch(2).apply(
        tf.data.experimental.parse_example_dataset({"y": tf.FixedLenFeature([], tf.float32),
                                                    "ids": tf.VarLenFeature(tf.int64)}))
    assert ds.output_shapes["y"].as_list() == [None]
    got = elements(ds)
    assert [e["y"].tolist() for e in got] == [[0.0, 1.0], [2.0, 3.0], [4.0]]
    assert triple(got[1]["ids"]) == ([[0, 0], [0, 1]], [0, 1], [2, 2])


def test_cache_to_files_keeps_sparse_components(tmp_path):
    """The file cache writes a sparse column as Arrow lists (no pickle) and reads it back."""
    parsed_ = parsed()
    ds = parsed_.cache(str(tmp_path / "c"))
    first = elements(ds)
    assert (tmp_path / "c.index").exists()
    again = elements(parsed_.map(lambda d: d).cache(str(tmp_path / "c")))  # from the files
    for a, b in zip(first, again):
        assert triple(a["v"]) == triple(b["v"]) and a["l"].tolist() == b["l"].tolist()
    assert [triple(e["v"])[1] for e in again] == [[1, 2], [], [5, 6, 7]]
    strs = tf.data.Dataset.from_tensor_slices(tf.SparseTensor([[0, 1], [2, 0]], ["a", "b"],
                                                              [3, 2]))
    elements(strs.cache(str(tmp_path / "s")))
    back = elements(strs.cache(str(tmp_path / "s")))
    assert [triple(v) for v in back] == [([[1]], ["a"], [2]), ([], [], [2]),
                                         ([[0]], ["b"], [2])]
