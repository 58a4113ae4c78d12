"""TF 1.x checkpoints (tensor_bundle: ``.index`` SSTable + ``.data-*``) restored into tensorvm
without TensorFlow (issue 14, item 11).

``tests/data/tf_ckpt`` was written by TensorFlow's own ``tf.compat.v1.train.Saver``
(``tests/data/make_tf_fixtures.py``, tensorflow-cpu 2.21); the expected values below are that
script's formulas. Tampered copies check that every size, offset and CRC is verified."""
import os
import shutil
from pathlib import Path

import fsspec
import numpy as np
import pytest
import tensorvm as tf
from tensorvm.storage import DataLossError, tensor_bundle

DATA = os.path.join(os.path.dirname(__file__), "data", "tf_ckpt")
PREFIX = os.path.join(DATA, "model.ckpt-7")
EXPECTED = {
    "w": np.arange(6, dtype=np.float32).reshape(3, 2) * 0.5,
    "dense/kernel": np.linspace(-1, 1, 8).reshape(2, 4),
    "dense/bias": np.array([1, -2, 3, -4], np.int32),
    "global_step": np.int64(7),
    "words": np.array([b"alpha", b"", b"\xffbytes"], dtype=object),
    "flag": np.array([True, False]),
}


@pytest.fixture
def g():
    with tf.Graph().as_default() as graph:
        yield graph


@pytest.fixture
def copy(tmp_path):
    out = tmp_path / "ckpt"
    shutil.copytree(DATA, out)
    return str(out / "model.ckpt-7")


def _model():
    w = tf.Variable(np.zeros((3, 2), np.float32), name="w")
    with tf.variable_scope("dense"):
        k = tf.get_variable("kernel", shape=[2, 4], dtype=tf.float64)
        b = tf.get_variable("bias", shape=[4], dtype=tf.int32,
                            initializer=tf.zeros_initializer())
    step = tf.Variable(np.int64(0), name="global_step")
    words = tf.Variable(np.array(["", "", ""], dtype=object), name="words")
    flag = tf.Variable([False, False], name="flag")
    return [w, k, b, step, words, flag]


def test_listing_matches_what_tensorflow_saved():
    assert tensor_bundle.list_bundle(PREFIX) == {
        "dense/bias": ("DT_INT32", (4,)), "dense/kernel": ("DT_DOUBLE", (2, 4)),
        "flag": ("DT_BOOL", (2,)), "global_step": ("DT_INT64", ()),
        "w": ("DT_FLOAT", (3, 2)), "words": ("DT_STRING", (3,))}
    got = tensor_bundle.read_bundle(PREFIX)
    for name, want in EXPECTED.items():
        np.testing.assert_array_equal(got[name], want)
        assert got[name].dtype == np.asarray(want).dtype


def test_saver_restores_a_tensorflow_checkpoint_and_the_model_runs(g):
    variables = _model()
    x = tf.placeholder(tf.float64, [None, 2])
    y = tf.matmul(x, variables[1]) + tf.cast(variables[2], tf.float64)
    saver = tf.train.Saver(variables)
    path = tf.train.latest_checkpoint(DATA)
    assert path == PREFIX  # TF's text state file (absolute path inside) is followed
    xs = np.array([[1.0, 2.0], [-0.5, 3.0]])
    with tf.Session() as s:
        saver.restore(s, path)
        values = s.run(variables)
        out = s.run(y, {x: xs})
    for v, name in zip(values, ["w", "dense/kernel", "dense/bias", "global_step", "words",
                                "flag"]):
        np.testing.assert_array_equal(v, EXPECTED[name])
    np.testing.assert_allclose(out, xs @ EXPECTED["dense/kernel"] + EXPECTED["dense/bias"])


def test_restore_into_partitioned_variables_and_a_renamed_variable(g):
    parts = [tf.Variable(np.zeros((1, 4)), name=f"kernel_part_{i}") for i in range(2)]
    renamed = tf.Variable(np.zeros((3, 2), np.float32), name="weights")
    saver = tf.train.Saver({"dense/kernel": parts, "w": renamed})
    with tf.Session() as s:
        saver.restore(s, PREFIX)
        p0, p1, r = s.run(parts + [renamed])
    np.testing.assert_array_equal(np.concatenate([p0, p1]), EXPECTED["dense/kernel"])
    np.testing.assert_array_equal(r, EXPECTED["w"])


def test_restore_from_memory_filesystem(g):
    fs = fsspec.filesystem("memory")
    for name in os.listdir(DATA):
        with open(os.path.join(DATA, name), "rb") as f:
            fs.pipe(f"/tvm-tf-ckpt/{name}", f.read())
    w = tf.Variable(np.zeros((3, 2), np.float32), name="w")
    saver = tf.train.Saver([w])
    with tf.Session() as s:
        saver.restore(s, tf.train.latest_checkpoint("memory://tvm-tf-ckpt"))
        np.testing.assert_array_equal(s.run(w), EXPECTED["w"])


def test_missing_tensor_and_wrong_shape(g):
    other = tf.Variable(np.zeros(2), name="not_saved")
    with tf.Session() as s, pytest.raises(tf.errors.NotFoundError, match="not_saved"):
        tf.train.Saver([other]).restore(s, PREFIX)
    wrong = tf.Variable(np.zeros((2, 3), np.float32), name="w")
    with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError,
                                          match=r"checkpoint holds shape \[3, 2\]"):
        tf.train.Saver([wrong]).restore(s, PREFIX)


def _entry(prefix, name):
    _, entries = tensor_bundle.read_bundle_index(prefix)
    return entries[name]


def _flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x10]))


@pytest.mark.parametrize("tensor", ["w", "words", "dense/kernel"])
def test_a_flipped_data_byte_is_data_loss_naming_the_file(g, copy, tensor):
    e = _entry(copy, tensor)
    data = copy + ".data-00000-of-00001"
    _flip(data, e.offset + e.size - 1)
    with pytest.raises(DataLossError) as err:
        tensor_bundle.read_bundle(copy, [tensor])
    assert "checksum mismatch" in str(err.value) and data in str(err.value)
    v = _model()
    with tf.Session() as s, pytest.raises(tf.errors.DataLossError, match="data-00000-of-00001"):
        tf.train.Saver(v).restore(s, copy)


def test_a_truncated_data_file_is_refused_before_reading(copy):
    data = copy + ".data-00000-of-00001"
    size = os.path.getsize(data)
    with open(data, "r+b") as f:
        f.truncate(size - 5)
    with pytest.raises(DataLossError) as err:
        tensor_bundle.read_bundle(copy)
    assert f"but the file has {size - 5}" in str(err.value) and data in str(err.value)


def test_a_missing_data_file(copy):
    os.remove(copy + ".data-00000-of-00001")
    with pytest.raises(DataLossError, match="is missing"):
        tensor_bundle.read_bundle(copy, ["w"])


def test_index_damage_is_data_loss_naming_the_index(copy):
    index = copy + ".index"
    raw = Path(index).read_bytes()
    _flip(index, 20)  # inside the first data block
    with pytest.raises(DataLossError, match="block checksum mismatch") as err:
        tensor_bundle.read_bundle_index(copy)
    assert index in str(err.value)
    Path(index).write_bytes(raw[:-1] + b"\x00")
    with pytest.raises(DataLossError, match="bad table magic"):
        tensor_bundle.read_bundle_index(copy)
    Path(index).write_bytes(raw[-40:])
    with pytest.raises(DataLossError, match="shorter than its 48-byte footer"):
        tensor_bundle.read_bundle_index(copy)
    Path(index).write_bytes(raw[40:])  # the footer's handles now point past the blocks
    with pytest.raises(DataLossError, match="past the end"):
        tensor_bundle.read_bundle_index(copy)


def test_not_a_checkpoint(tmp_path, g):
    assert not tensor_bundle.is_tf_checkpoint(str(tmp_path / "nothing"))
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    w = tf.Variable(np.zeros(2), name="w")
    with tf.Session() as s, pytest.raises(tf.errors.NotFoundError):
        tf.train.Saver([w]).restore(s, str(tmp_path / "nothing"))


# ---- an independent writer of the format (test-side), for what the small TF fixture lacks:
# several data blocks, restart points inside blocks, a big-endian bundle, two data shards.

def _varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not out[-1] & 0x80:
            return bytes(out)


def _sst_block(kvs, restart_interval=2):
    import struct
    out, restarts, last = b"", [], b""
    for i, (k, v) in enumerate(kvs):
        shared = 0
        if i % restart_interval == 0:
            restarts.append(len(out))
        else:
            while shared < min(len(k), len(last)) and k[shared] == last[shared]:
                shared += 1
        out += _varint(shared) + _varint(len(k) - shared) + _varint(len(v)) + k[shared:] + v
        last = k
    return out + b"".join(struct.pack("<I", r) for r in restarts) + \
        struct.pack("<I", len(restarts))


def _sstable(kvs, per_block=3):
    import struct

    from tensorvm.storage.tfrecord import masked_crc32c
    data, index = b"", []

    def put(block):
        nonlocal data
        handle = _varint(len(data)) + _varint(len(block))
        data += block + b"\x00" + struct.pack("<I", masked_crc32c(block + b"\x00"))
        return handle
    for lo in range(0, len(kvs), per_block):
        chunk = kvs[lo:lo + per_block]
        index.append((chunk[-1][0], put(_sst_block(chunk))))
    meta = put(_sst_block([]))
    idx = put(_sst_block(index, restart_interval=1))
    footer = (meta + idx).ljust(40, b"\x00") + struct.pack("<Q", 0xDB4775248B80FB57)
    return data + footer


def test_reader_on_a_multi_block_big_endian_two_shard_bundle(tmp_path):
    import google_crc32c
    from tensorvm.storage import tf_protos
    from tensorvm.storage.tfrecord import masked_crc32c
    rng = np.random.default_rng(0)
    tensors = {f"layer_{i:02d}/w": rng.normal(size=(i + 1, 2)).astype(np.float32)
               for i in range(8)}
    prefix = str(tmp_path / "big.ckpt")
    shards, entries = [b"", b""], {}
    for k, (name, arr) in enumerate(sorted(tensors.items())):
        raw = arr.astype(">f4").tobytes()
        e = tf_protos.BundleEntryProto(dtype=1, shard_id=k % 2, offset=len(shards[k % 2]),
                                       size=len(raw), crc32c=masked_crc32c(raw))
        e.shape.dim.add(size=arr.shape[0])
        e.shape.dim.add(size=arr.shape[1])
        shards[k % 2] += raw
        entries[name] = e.SerializeToString()
    header = tf_protos.BundleHeaderProto(num_shards=2, endianness=1)
    kvs = [(b"", header.SerializeToString())] + \
        [(k.encode(), v) for k, v in sorted(entries.items())]
    Path(prefix + ".index").write_bytes(_sstable(kvs))
    for i, raw in enumerate(shards):
        Path(f"{prefix}.data-{i:05d}-of-00002").write_bytes(raw)
    got = tensor_bundle.read_bundle(prefix)
    assert sorted(got) == sorted(tensors)
    for name, arr in tensors.items():
        np.testing.assert_array_equal(got[name], arr)
        assert got[name].dtype == np.float32
    assert google_crc32c.value(b"123456789") == 0xE3069283  # the CRC the writer above used


def test_saving_over_a_tensorflow_checkpoints_prefix_restores_what_was_saved(g, copy):
    """A TF checkpoint at the prefix (``model.ckpt-7.index``) shadowed the checkpoint tensorvm
    had just saved there: restore read TF's values."""
    variables = _model()
    saver = tf.train.Saver(variables)
    w = variables[0]
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(w.assign(np.full((3, 2), 9.0, np.float32)))
        path = saver.save(s, copy)
        assert path == copy
        s.run(w.assign(np.zeros((3, 2), np.float32)))
        saver.restore(s, path)
        np.testing.assert_array_equal(s.run(w), np.full((3, 2), 9.0, np.float32))
