"""tensorvm.tf_api.tf_shim: ``import tensorflow`` resolved to tensorvm (finder semantics, errors), the
runners (``tensorvm tf``, ``python -m tensorvm.tf_api.tf_shim``) and their exit codes,
``input_data`` (TF's MNIST reader and ``next_batch``), and the TF API gaps that TensorFlow's
tutorial programs hit (``tf.gfile``/``tf.io.gfile``, ``tf.random``, ``placeholder(shape=n)``).
"""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.tf_api import tf_shim
from tensorvm.tutorials.mnist import input_data

TENSORVM = Path(sys.executable).parent / "tensorvm"


@pytest.fixture
def shim():
    """The finder installed for one test; removed (with every module it made) afterwards."""
    assert not tf_shim.installed()
    tf_shim.install()
    try:
        yield
    finally:
        tf_shim.uninstall()
    assert not any(n == "tensorflow" or n.startswith("tensorflow.") for n in sys.modules)


# ---- finder semantics -------------------------------------------------------------------------
@pytest.fixture
def real_tf(tmp_path):
    """An environment where a (stand-in) real TensorFlow is installed."""
    pkg = tmp_path / "site" / "tensorflow"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("REAL = True\n")
    return {**os.environ, "PYTHONPATH": str(tmp_path / "site")}


def test_importing_tensorvm_never_shadows_an_installed_tensorflow(real_tf):
    code = "import tensorvm, sys, tensorflow; print(any(type(f).__name__ == " \
           "'TensorFlowFinder' for f in sys.meta_path), tensorflow.REAL)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=real_tf).stdout.split()
    assert out == ["False", "True"]


def test_tensorflow_names_resolve_to_tensorvm(shim):
    import tensorflow as tf
    import tensorflow.compat.v1 as tf1
    from tensorflow.contrib import rnn
    from tensorflow.examples.tutorials.mnist import input_data as idata
    assert tf.placeholder is tv.placeholder and tf.Session is tv.Session
    assert tf1.placeholder is tv.placeholder and tf1.disable_v2_behavior is tv.disable_v2_behavior
    assert tf.compat.v1.train.Saver is tv.train.Saver
    assert rnn.BasicLSTMCell is tv.contrib.rnn.BasicLSTMCell
    assert idata.read_data_sets is input_data.read_data_sets
    import tensorflow.compat.v1.nn as nn1
    from tensorflow import nn
    assert nn.relu is nn1.relu is tv.nn.relu
    assert tf_shim.resolve("tensorflow.compat.v1.contrib.rnn") is tv.contrib.rnn
    import tensorvm.runtime.timeline
    from tensorflow.python.client import timeline  # mnist_softmax_xla.py's
    assert timeline.Timeline is tensorvm.runtime.timeline.Timeline
    with pytest.raises(ModuleNotFoundError, match="tensorflow.python.framework"):
        from tensorflow.python.framework import ops  # noqa: F401


def test_generic_mapping_reaches_lazily_imported_submodules(shim):
    # tensorflow.X -> tensorvm.X also where tensorvm imports X only on demand
    import tensorflow.tutorials.mnist.mnist as m
    import tensorvm.tutorials.mnist.mnist as real
    assert m.inference is real.inference


def test_the_import_system_never_writes_into_tensorvm(shim):
    before = set(vars(tv))
    import tensorflow.compat.v1.nn
    import tensorflow.examples.tutorials.mnist.input_data  # noqa: F401
    assert set(vars(tv)) == before  # no 'examples' or 'compat' attributes added to tensorvm


def test_unknown_names_fail_with_what_tensorvm_lacks(shim):
    with pytest.raises(ModuleNotFoundError, match=r"No module named 'tensorflow.lite'.*"
                       r"tensorvm.lite") as e:
        import tensorflow.lite
    assert e.value.name == "tensorvm.lite"  # what is missing
    with pytest.raises(ModuleNotFoundError, match=r"tensorflow.contrib.slim'.*"
                       r"tensorvm.contrib.slim"):
        from tensorflow.contrib import slim  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match="TensorFlow 1.x's graph API"):
        import tensorflow.compat.v2
    with pytest.raises(ModuleNotFoundError, match="has no tensorvm.keras_nothing"):
        from tensorflow import keras_nothing  # noqa: F401
    import tensorflow as tf
    with pytest.raises(AttributeError, match=r"tensorvm.*has no tensorvm.no_such_op"):
        tf.no_such_op  # noqa: B018


def test_install_refuses_over_an_imported_real_tensorflow(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", type(sys)("tensorflow"))
    with pytest.raises(RuntimeError, match="already imported"):
        tf_shim.install()
    assert not tf_shim.installed()


def test_uninstall_restores_a_missing_tensorflow(shim):
    import tensorflow
    tf_shim.uninstall()
    with pytest.raises(ModuleNotFoundError):
        import tensorflow  # noqa: F401
    tf_shim.install()  # for the fixture's teardown


# ---- runners and exit codes -------------------------------------------------------------------
PROGRAM = textwrap.dedent("""\
    import sys
    import tensorflow as tf
    flags = tf.app.flags
    flags.DEFINE_integer("steps", 3, "steps")
    FLAGS = flags.FLAGS

    def main(argv):
        x = tf.placeholder(tf.float32, shape=(2))
        with tf.Session() as sess:
            total = sess.run(tf.reduce_sum(x * FLAGS.steps), {x: [1.0, 2.0]})
        print("total", total, "rest", argv[1:], "name", __name__)
        return int(total) if FLAGS.steps == 7 else 0

    if __name__ == "__main__":
        tf.app.run()
    """)


@pytest.fixture
def prog(tmp_path):
    p = tmp_path / "prog.py"
    p.write_text(PROGRAM)
    return p


CLI, MODULE = [str(TENSORVM), "tf"], [sys.executable, "-m", "tensorvm.tf_api.tf_shim"]


@pytest.mark.parametrize("cmd", [CLI, MODULE], ids=["cli", "module"])
def test_runners_pass_args_to_the_programs_flags(prog, cmd):
    ok = subprocess.run(cmd + [str(prog), "--steps=2", "extra"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["total", "6.0", "rest", "['extra']", "name", "__main__"]


def test_cli_exits_with_the_programs_status_and_shadows_an_installed_tf(prog, real_tf):
    seven = subprocess.run(CLI + [str(prog), "--steps", "7"], capture_output=True, text=True,
                           env=real_tf)  # asked for: the program gets tensorvm
    assert seven.returncode == 21 and "total 21.0" in seven.stdout


@pytest.mark.parametrize("cmd", [CLI, MODULE], ids=["cli", "module"])
def test_runners_refuse_a_missing_program_in_one_line(tmp_path, cmd):
    r = subprocess.run(cmd + [str(tmp_path / "nope.py"), "--x"], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no such program file" in r.stderr
    assert "nope.py" in r.stderr
    if cmd is CLI:
        bare = subprocess.run(cmd, capture_output=True, text=True)
        assert bare.returncode == 2 and "Usage: tensorvm tf" in bare.stdout


def test_cli_reports_a_failing_program_like_python(tmp_path):
    p = tmp_path / "bad.py"
    p.write_text("import tensorflow as tf\nimport sys\nsys.exit('bad flags')\n")
    r = subprocess.run([str(TENSORVM), "tf", str(p)], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip() == "bad flags"
    p.write_text("import tensorflow.lite\n")
    r = subprocess.run([str(TENSORVM), "tf", str(p)], capture_output=True, text=True)
    assert r.returncode == 1
    assert "ModuleNotFoundError: No module named 'tensorflow.lite'" in r.stderr


def test_range_knob_limits_the_programs_own_loops(tmp_path):
    p = tmp_path / "loop.py"
    p.write_text("import tensorflow as tf\nprint(len([i for i in range(20000)]), "
                 "len(range(3)))\n")
    r = subprocess.run([sys.executable, "-m", "tensorvm.tf_api.tf_shim", str(p)], capture_output=True,
                       text=True, env={**os.environ, tf_shim.RANGE_LIMIT_ENV: "50"})
    assert r.returncode == 0 and r.stdout.split() == ["50", "3"], r.stderr


def test_the_programs_sibling_mnist_module_wins(shim, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", sys.argv[:])
    monkeypatch.setattr(sys, "path", sys.path[:])
    monkeypatch.setenv(tf_shim.PROGRAM_ENV, "")  # run_program sets it: restored afterwards
    (tmp_path / "mnist.py").write_text("IMAGE_PIXELS = 'sibling'\n")
    p = tmp_path / "main.py"
    p.write_text("from tensorflow.examples.tutorials.mnist import mnist\n"
                 "print(mnist.IMAGE_PIXELS)\n")
    tf_shim.run_program(str(p))
    assert capsys.readouterr().out.strip() == "sibling"
    tf_shim.uninstall()
    tf_shim.install()
    (tmp_path / "mnist.py").unlink()
    tf_shim.run_program(str(p))  # none beside it: tensorvm's own
    assert capsys.readouterr().out.strip() == "784"


# ---- input_data -------------------------------------------------------------------------------
def _write_mnist(d, n_train=12, n_test=4):
    images = np.arange(n_train * 28 * 28, dtype=np.int64).reshape(n_train, 28, 28) % 256
    input_data.write_idx(str(d / "train-images-idx3-ubyte.gz"), images)
    input_data.write_idx(str(d / "train-labels-idx1-ubyte.gz"), np.arange(n_train) % 10)
    input_data.write_idx(str(d / "t10k-images-idx3-ubyte.gz"), images[:n_test])
    input_data.write_idx(str(d / "t10k-labels-idx1-ubyte.gz"), np.arange(n_test) % 10)
    return images


def test_read_data_sets_splits_scales_and_encodes_as_tf(tmp_path):
    images = _write_mnist(tmp_path)
    ds = input_data.read_data_sets(str(tmp_path), one_hot=True, validation_size=2)
    assert (ds.train.num_examples, ds.validation.num_examples, ds.test.num_examples) == (10, 2, 4)
    np.testing.assert_allclose(ds.validation.images,
                               images[:2].reshape(2, 784).astype(np.float32) / 255, rtol=1e-6)
    assert ds.train.images.dtype == np.float32 and ds.train.labels.shape == (10, 10)
    np.testing.assert_array_equal(ds.train.labels.argmax(1), np.arange(2, 12) % 10)
    raw = input_data.read_data_sets(str(tmp_path), dtype=tv.uint8, reshape=False,
                                    validation_size=0)
    assert raw.train.images.shape == (12, 28, 28, 1) and raw.train.images.dtype == np.uint8
    np.testing.assert_array_equal(raw.train.labels, np.arange(12) % 10)
    with pytest.raises(ValueError, match="Validation size should be between 0 and 12"):
        input_data.read_data_sets(str(tmp_path))  # TF's default validation_size is 5000
    with pytest.raises(TypeError, match="Invalid image dtype"):
        input_data.read_data_sets(str(tmp_path), dtype=tv.int32, validation_size=2)


def test_next_batch_shuffles_each_epoch_and_wraps_as_tf(tmp_path):
    _write_mnist(tmp_path)
    train = input_data.read_data_sets(str(tmp_path), validation_size=2, seed=5).train
    labels = train.labels.copy()
    perm = np.arange(10)  # TF: np.random.shuffle(arange(n)) on the state seeded by the DataSet
    np.random.RandomState(5).shuffle(perm)
    _, y1 = train.next_batch(4)
    np.testing.assert_array_equal(y1, labels[perm][:4])
    _, y2 = train.next_batch(4)
    _, y3 = train.next_batch(4)  # crosses the epoch: the 2 left, then 2 of a new shuffle
    assert train.epochs_completed == 1 and len(y3) == 4
    np.testing.assert_array_equal(y3[:2], labels[perm][8:])
    seen = np.concatenate([y1, y2, y3[:2]])
    assert sorted(seen.tolist()) == sorted(labels.tolist())  # each example once an epoch
    x, y = train.next_batch(3, shuffle=False)
    assert len(x) == len(y) == 3
    fx, fy = input_data.read_data_sets("", fake_data=True, one_hot=True).train.next_batch(2, True)
    assert len(fx) == 2 and len(fx[0]) == 784 and fy == [[1] + [0] * 9] * 2


def test_missing_files_name_every_file_needed_and_nothing_is_downloaded(tmp_path):
    input_data.write_idx(str(tmp_path / "train-labels-idx1-ubyte.gz"), np.arange(3))
    with pytest.raises(FileNotFoundError) as e:
        input_data.read_data_sets(str(tmp_path / "nowhere"))
    for name in input_data.FILES:
        assert name in str(e.value)
    with pytest.raises(FileNotFoundError) as e:
        input_data.read_data_sets(str(tmp_path))
    assert "train-labels" not in str(e.value) and "t10k-images-idx3-ubyte.gz" in str(e.value)


def test_plain_idx_files_and_bad_magic(tmp_path):
    _write_mnist(tmp_path)
    for name in input_data.FILES:  # un-gzipped copies only
        data = gzip.decompress((tmp_path / name).read_bytes())
        (tmp_path / name).unlink()
        (tmp_path / name[:-3]).write_bytes(data)
    assert input_data.read_data_sets(str(tmp_path), validation_size=0).train.num_examples == 12
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(gzip.decompress(gzip.compress(
        np.array([2051, 4], ">u4").tobytes() + bytes(4))))
    with pytest.raises(ValueError, match="Invalid magic number 2051 in MNIST label file"):
        input_data.read_data_sets(str(tmp_path), validation_size=0)


# ---- API gaps the tutorials hit ---------------------------------------------------------------
def test_placeholder_accepts_an_int_shape():
    with tv.Graph().as_default():
        x = tv.placeholder(tv.int32, shape=(3))  # (3) is 3: TF reads it as [3]
        assert x.shape.as_list() == [3]
        with tv.Session() as sess:
            np.testing.assert_array_equal(sess.run(x * 2, {x: [1, 2, 3]}), [2, 4, 6])


def test_gfile_on_local_and_memory_paths(tmp_path):
    for root in (str(tmp_path / "g"), "memory://tfshim-gfile"):
        sub = root + "/a/b"
        assert not tv.gfile.Exists(sub)
        tv.io.gfile.makedirs(sub)
        assert tv.gfile.IsDirectory(sub) and tv.io.gfile.isdir(root + "/a")
        with tv.gfile.GFile(sub + "/x.txt", "w") as f:
            f.write("one\ntwo\n")
        with tv.io.gfile.GFile(sub + "/x.txt", "rb") as f:
            assert f.read() == b"one\ntwo\n"
        assert tv.gfile.ListDirectory(root + "/a") == ["b"]
        assert tv.io.gfile.glob(sub + "/*.txt")[0].endswith("a/b/x.txt")
        assert tv.gfile.Stat(sub + "/x.txt").length == 8
        tv.gfile.Copy(sub + "/x.txt", sub + "/y.txt")
        with pytest.raises(tv.errors.AlreadyExistsError):
            tv.gfile.Copy(sub + "/x.txt", sub + "/y.txt")
        tv.io.gfile.rename(sub + "/y.txt", sub + "/z.txt")
        walked = [(Path(d).name, dirs, files) for d, dirs, files in tv.gfile.Walk(root)]
        assert walked == [("tfshim-gfile" if root.startswith("memory:") else "g", ["a"], []),
                          ("a", ["b"], []), ("b", [], ["x.txt", "z.txt"])]
        tv.io.gfile.remove(sub + "/z.txt")
        tv.gfile.DeleteRecursively(root)
        assert not tv.io.gfile.exists(root)
        with pytest.raises(tv.errors.NotFoundError, match="x.txt"):
            tv.gfile.GFile(sub + "/x.txt")
        with pytest.raises(tv.errors.NotFoundError):
            tv.io.gfile.rmtree(root)


def test_random_namespace():
    assert tv.random.normal is tv.random_normal and tv.random.uniform is tv.random_uniform
    with tv.Graph().as_default():
        tv.random.set_random_seed(3)
        x = tv.random.truncated_normal([1000], stddev=0.5)
        with tv.Session() as sess:
            v = sess.run(x)
    assert np.abs(v).max() <= 1.0 and 0.3 < v.std() < 0.5


def test_a_writer_dropped_unclosed_still_writes_everything_at_exit(tmp_path):
    # fully_connected_feed.py's writer is a local of run_training() and is never closed: its
    # last events were lost and the event thread died at exit with 'handle is closed'
    code = textwrap.dedent(f"""\
        import tensorvm as tv
        def run():
            w = tv.summary.FileWriter({str(tmp_path)!r})
            for step in range(50):
                w.add_summary(tv.Summary(value=[tv.Summary.Value(tag="x",
                                                                 simple_value=step)]), step)
        run()
        import gc; gc.collect()
        """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    (path,) = tmp_path.glob("events.out.tfevents.*")
    steps = [e.step for e in EventFileLoader(str(path)).Load() if e.HasField("summary")]
    assert steps == list(range(50))


def test_projector_config_is_read_by_tensorboards_proto(shim, tmp_path):
    text_format = pytest.importorskip("google.protobuf.text_format")
    pb2 = pytest.importorskip("tensorboard.plugins.projector.projector_config_pb2")
    from tensorflow.contrib.tensorboard.plugins import projector  # word2vec_basic.py's import
    config = projector.ProjectorConfig()
    emb = config.embeddings.add()
    emb.tensor_name = "embeddings/Variable:0"
    emb.metadata_path = str(tmp_path / 'm"é.tsv')
    emb.sprite.image_path = "sprite.png"
    emb.sprite.single_image_dim.extend([28, 28])
    writer = tv.summary.FileWriter(str(tmp_path))
    projector.visualize_embeddings(writer, config)
    writer.close()
    parsed = text_format.Parse((tmp_path / "projector_config.pbtxt").read_text(),
                               pb2.ProjectorConfig())
    (e,) = parsed.embeddings
    assert (e.tensor_name, e.metadata_path) == ("embeddings/Variable:0", emb.metadata_path)
    assert list(e.sprite.single_image_dim) == [28, 28] and e.sprite.image_path == "sprite.png"


def test_sigterm_during_a_step_exits_143(tmp_path):
    p = tmp_path / "forever.py"
    p.write_text(textwrap.dedent("""\
        import tensorflow as tf
        x = tf.placeholder(tf.float32, [None])
        y = tf.reduce_sum(x * 2)
        with tf.Session() as sess:
            print("ready", flush=True)
            while True:
                sess.run(y, {x: [1.0]})
        """))
    proc = subprocess.Popen([str(TENSORVM), "tf", str(p)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err.strip() == "tensorvm: terminated"  # was 130


TF2_COMPAT_PROGRAM = textwrap.dedent("""\
    import sys
    import numpy as np
    import tensorflow.compat.v1 as tf
    from tensorflow.examples.tutorials.mnist import input_data
    tf.disable_v2_behavior()

    mnist = input_data.read_data_sets(sys.argv[1], one_hot=True, validation_size=100)
    x = tf.placeholder(tf.float32, [None, 784])
    y_ = tf.placeholder(tf.float32, [None, 10])
    logits = tf.layers.dense(x, 10)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=logits))
    step = tf.train.AdamOptimizer(0.01).minimize(loss)
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), tf.argmax(y_, 1)), tf.float32))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(60):
            xs, ys = mnist.train.next_batch(50)
            sess.run(step, {x: xs, y_: ys})
        print("epochs", mnist.train.epochs_completed)
        print("accuracy", sess.run(acc, {x: mnist.test.images, y_: mnist.test.labels}))
    """)


def test_a_tf2_compat_v1_program_trains_on_mnist_files(shim, tmp_path, monkeypatch, capsys):
    # the committed end-to-end check (TensorFlow's own tutorials are in test_tf1_official.py)
    monkeypatch.setattr(sys, "argv", sys.argv[:])
    monkeypatch.setattr(sys, "path", sys.path[:])
    monkeypatch.setenv(tf_shim.PROGRAM_ENV, "")  # run_program sets it: restored afterwards
    rng = np.random.RandomState(0)
    protos = rng.rand(10, 28, 28) < 0.3
    labels = rng.randint(0, 10, 700)
    images = np.clip(200 * protos[labels] + 60 * rng.rand(700, 28, 28), 0, 255)
    input_data.write_idx(str(tmp_path / "train-images-idx3-ubyte.gz"), images[:500])
    input_data.write_idx(str(tmp_path / "train-labels-idx1-ubyte.gz"), labels[:500])
    input_data.write_idx(str(tmp_path / "t10k-images-idx3-ubyte.gz"), images[500:])
    input_data.write_idx(str(tmp_path / "t10k-labels-idx1-ubyte.gz"), labels[500:])
    p = tmp_path / "prog.py"
    p.write_text(TF2_COMPAT_PROGRAM)
    with tv.Graph().as_default():  # the program's graph stays out of the other tests
        tf_shim.run_program(str(p), [str(tmp_path)])
    out = dict(line.split() for line in capsys.readouterr().out.splitlines())
    assert out["epochs"] == "7"  # 60 batches of 50 over 400 examples
    chance = np.bincount(labels[500:]).max() / 200
    assert float(out["accuracy"]) > chance + 4 * np.sqrt(chance * (1 - chance) / 200)


def test_version_and_star_import(shim):
    import tensorflow as tf
    import tensorflow.compat.v1 as tf1
    assert tf.__version__ == tf.VERSION == tf1.__version__ == tf_shim.TF_API_VERSION
    assert tf.__tensorvm_version__ == tv.__version__
    assert tf.__version__.startswith("1.")  # programs pick TF 1.x code paths by it
    namespace = {}
    exec("from tensorflow import *", namespace)  # noqa: S102
    assert namespace["placeholder"] is tv.placeholder and namespace["Session"] is tv.Session
    assert tf.__file__ == tv.__file__


@pytest.mark.cluster
def test_a_program_that_starts_worker_processes_runs_under_the_shim(tmp_path):
    # Dask's spawned workers import the program's main module again: with the file's own
    # path as main, its 'import tensorflow' failed there ('Nanny failed to start')
    p = tmp_path / "dist.py"
    p.write_text(textwrap.dedent("""\
        import numpy as np
        import tensorflow as tf

        def double(v):
            return (2 * v).astype(np.float32)

        def main():
            x = tf.placeholder(tf.float32, [None])
            with tf.device("/job:worker/task:0"):
                y = tf.reduce_sum(tf.py_func(double, [x], tf.float32))
            with tf.Session("local") as sess:
                print("value", sess.run(y, {x: [1.0, 2.0]}))

        if __name__ == "__main__":
            main()
        """))
    r = subprocess.run(CLI + [str(p)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0 and r.stdout.split() == ["value", "6.0"], r.stderr[-3000:]


def test_softmax_cross_entropy_casts_labels_to_the_logits_dtype():
    # TF casts labels to the logits' dtype: float64 one-hot labels (input_data's, through
    # tf.data, as in aymericdamien's tensorflow_dataset_api.py) with float32 logits
    logits = np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], np.float32)
    labels = np.eye(3)[[1, 2]]  # float64
    z = logits - logits.max(1, keepdims=True)
    expected = -(labels * (z - np.log(np.exp(z).sum(1, keepdims=True)))).sum(1)
    with tv.Graph().as_default():
        y = tv.placeholder(tv.float64, [None, 3])
        x = tv.constant(logits)
        outs = [f(labels=y, logits=x) for f in (tv.nn.softmax_cross_entropy_with_logits,
                                                tv.nn.softmax_cross_entropy_with_logits_v2)]
        assert all(o.dtype == tv.float32 for o in outs)
        with tv.Session() as sess:
            for v in sess.run(outs, {y: labels}):
                np.testing.assert_allclose(v, expected, rtol=1e-6)


def test_config_proto_option_messages_as_tf1_programs_set_them():
    config = tv.ConfigProto()
    config.gpu_options.allow_growth = True  # the commonest TF 1.x line of all
    config.gpu_options.per_process_gpu_memory_fraction = 0.5
    config.graph_options.optimizer_options.global_jit_level = tv.OptimizerOptions.ON_1
    other = tv.ConfigProto()
    assert other.gpu_options.allow_growth is False  # each config its own messages
    assert other.graph_options.optimizer_options.global_jit_level == 0
    c2 = tv.ConfigProto(gpu_options=tv.GPUOptions(allow_growth=True),
                        graph_options=tv.GraphOptions(optimizer_options=tv.OptimizerOptions(
                            opt_level=tv.OptimizerOptions.L0, do_constant_folding=False)))
    assert c2.graph_options.optimizer_options.opt_level == tv.OptimizerOptions.L0 == -1
    assert (tv.OptimizerOptions.ON_1, tv.OptimizerOptions.ON_2, tv.OptimizerOptions.OFF) == \
        (1, 2, -1)
    with tv.Graph().as_default():
        x = tv.constant(3.0)
        with tv.Session(config=config) as sess:
            assert sess.run(x * 2) == 6.0
