"""Exporting graphs with functions (while_loop, dynamic_rnn, TensorArray loops, tv.data
pipelines) as plain JSON meta graphs, and importing them in a fresh process.

The JSON carries a loop's cond/body and a dataset's map/filter functions as nested graph
definitions (TF's FunctionDefLibrary idea); nothing in the file is code: a Python generator
or py_func is refused at export, naming the op.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorvm as tv
from tensorvm.framework.graph_def import graph_from_dict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_child(tmp_path, code: str) -> dict:
    """Run ``code`` in a fresh Python process; it prints one JSON line (its last line)."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.environ.get("PYTHONPATH", "")] if p)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=240, cwd=str(tmp_path), env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- in-process JSON round trip --------------------------------------------------------------

def test_while_loop_graph_def_is_json_and_round_trips():
    g = tv.Graph()
    with g.as_default():
        n = tv.placeholder(tv.int32, [], name="n")
        i, s = tv.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + i * i), [0, 0],
                             name="loop")
        tv.identity(s, name="out")
    d = json.loads(json.dumps(g.as_graph_def()))
    g2 = graph_from_dict(d)
    with tv.Session(graph=g2) as sess:
        got = sess.run(g2.get_tensor_by_name("out:0"), {g2.get_tensor_by_name("n:0"): 6})
    assert int(got) == sum(k * k for k in range(6))


def test_nested_while_loop_round_trips():
    g = tv.Graph()
    with g.as_default():
        def body(i, s):
            _, t = tv.while_loop(lambda j, t: j < i, lambda j, t: (j + 1, t + 1.0), [0, s])
            return i + 1, t
        _, r = tv.while_loop(lambda i, s: i < 4, body, [0, 0.0])
        tv.identity(r, name="out")
    g2 = graph_from_dict(json.loads(json.dumps(g.as_graph_def())))
    with tv.Session(graph=g2) as sess:
        assert float(sess.run(g2.get_tensor_by_name("out:0"))) == 0 + 1 + 2 + 3


def test_numpy_dataset_source_round_trips_its_arrays():
    data = np.arange(12, dtype=np.float32).reshape(6, 2)
    g = tv.Graph()
    with g.as_default():
        ds = tv.data.Dataset.from_tensor_slices(data).map(lambda x: x * 2.0).batch(4)
        nxt = ds.make_one_shot_iterator().get_next()
        tv.identity(nxt, name="out")
    g2 = graph_from_dict(json.loads(json.dumps(g.as_graph_def())))
    out = g2.get_tensor_by_name("out:0")
    with tv.Session(graph=g2) as sess:
        np.testing.assert_array_equal(sess.run(out), data[:4] * 2)
        np.testing.assert_array_equal(sess.run(out), data[4:] * 2)
        with pytest.raises(tv.errors.OutOfRangeError):
            sess.run(out)


# ---- refusals at export ----------------------------------------------------------------------

def test_generator_dataset_cannot_be_exported():
    g = tv.Graph()
    with g.as_default():
        ds = tv.data.Dataset.from_generator(lambda: iter([1, 2, 3]), tv.int64)
        ds.make_one_shot_iterator().get_next()
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"(?s)OneShotIterator.*generator.*cannot be exported"):
            g.as_graph_def()
        with pytest.raises(tv.errors.InvalidArgumentError, match="generator"):
            tv.train.export_meta_graph()


def test_py_func_cannot_be_exported():
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [])
        tv.py_func(lambda a: a + 1, [x], tv.float32, name="my_py")
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"my_py.*PyFunc.*Python function.*cannot be exported"):
            g.as_graph_def()


def test_py_func_inside_a_loop_body_is_refused_naming_the_op():
    g = tv.Graph()
    with g.as_default():
        def body(i):
            return tv.py_func(lambda a: a + 1, [i], tv.int32, name="inner_py")
        tv.while_loop(lambda i: i < 3, lambda i: tv.reshape(body(i), []), [0])
        with pytest.raises(tv.errors.InvalidArgumentError, match=r"inner_py.*PyFunc"):
            g.as_graph_def()


# ---- bad input at import ---------------------------------------------------------------------

def _simple_meta(tmp_path):
    g = tv.Graph()
    with g.as_default():
        i = tv.while_loop(lambda i: i < 3, lambda i: i + 1, [0], name="loop")
        tv.identity(i, name="out")
        path = str(tmp_path / "m.meta")
        tv.train.export_meta_graph(path)
    return path


def test_corrupt_or_truncated_meta_graph_file(tmp_path):
    path = _simple_meta(tmp_path)
    raw = open(path, "rb").read()
    bad = tmp_path / "trunc.meta"
    bad.write_bytes(raw[: len(raw) // 2])
    with tv.Graph().as_default():
        with pytest.raises(tv.errors.DataLossError, match=r"trunc\.meta.*not a valid"):
            tv.train.import_meta_graph(str(bad))
    junk = tmp_path / "junk.meta"
    junk.write_bytes(b"\x80\x04\x95 not json at all")
    with tv.Graph().as_default():
        with pytest.raises(tv.errors.DataLossError, match=r"junk\.meta"):
            tv.train.import_meta_graph(str(junk))
    other = tmp_path / "other.meta"
    other.write_text(json.dumps({"format": "something.else"}))
    with tv.Graph().as_default():
        with pytest.raises(tv.errors.InvalidArgumentError, match="not a tensorvm meta graph"):
            tv.train.import_meta_graph(str(other))
    with tv.Graph().as_default():
        with pytest.raises(tv.errors.NotFoundError, match="missing.meta"):
            tv.train.import_meta_graph(str(tmp_path / "missing.meta"))


def test_unknown_op_type_is_refused_naming_the_node(tmp_path):
    path = _simple_meta(tmp_path)
    d = json.loads(open(path).read())
    d["graph_def"]["node"][0]["op"] = "LaunchMissiles"
    name = d["graph_def"]["node"][0]["name"]
    with tv.Graph().as_default():
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=rf"{name}.*LaunchMissiles.*not registered"):
            tv.train.import_meta_graph(d)


def _loop_node(d):
    return next(n for n in d["graph_def"]["node"] if n["op"] in ("While", "StatelessWhile"))


def test_function_referring_to_a_missing_node_is_refused(tmp_path):
    path = _simple_meta(tmp_path)
    d = json.loads(open(path).read())
    body = _loop_node(d)["attr"]["body"]["__func__"]
    body["graph"]["node"][-1]["input"][0] = "no_such_node:0"
    with tv.Graph().as_default():
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"(?s)function 'loop/body'.*no_such_node"):
            tv.train.import_meta_graph(d)
    d = json.loads(open(path).read())
    _loop_node(d)["attr"]["cond"]["__func__"]["fetches"] = [["ghost", 0]]
    with tv.Graph().as_default():
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"(?s)function 'loop/cond'.*ghost"):
            tv.train.import_meta_graph(d)


def test_no_code_is_loaded_from_the_file(tmp_path):
    """Stage classes are looked up by name among tv.data's stages only; anything else (a
    made-up class, a Generator, a pickle blob) is refused."""
    g = tv.Graph()
    with g.as_default():
        tv.data.Dataset.range(3).make_one_shot_iterator().get_next()
        d = tv.train.export_meta_graph()
    text = json.dumps(d)
    assert "Range" in text
    for evil in ('"os.system"', '"Generator"'):
        bad = json.loads(text.replace('"Range"', evil))
        with tv.Graph().as_default():
            with pytest.raises(tv.errors.InvalidArgumentError, match="dataset stage"):
                tv.train.import_meta_graph(bad)
    bad = json.loads(text)
    it = next(n for n in bad["graph_def"]["node"] if n["op"] == "IteratorV2")
    it["attr"]["stage"] = {"__pickle__": "gASVAAAAAAAAAA=="}
    with tv.Graph().as_default():
        with pytest.raises(tv.errors.InvalidArgumentError, match="__pickle__"):
            tv.train.import_meta_graph(bad)


# ---- export here, import in a fresh process --------------------------------------------------

def test_while_loop_program_in_a_fresh_process(tmp_path):
    g = tv.Graph()
    with g.as_default():
        n = tv.placeholder(tv.int32, [], name="n")
        x = tv.constant([1.0, 2.0], name="x")
        i, acc = tv.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 1.5 + x),
                               [0, tv.zeros([2])])
        tv.identity(acc, name="out")
        tv.add_to_collection("outputs", acc)
        path = str(tmp_path / "loop.meta")
        tv.train.export_meta_graph(path)
        with tv.Session() as sess:
            want = sess.run(acc, {n: 5})
    got = _run_child(tmp_path, f"""
        import json, tensorvm as tv
        tv.train.import_meta_graph({path!r})
        g = tv.get_default_graph()
        with tv.Session() as sess:
            out = sess.run(g.get_tensor_by_name("out:0"), {{"n:0": 5}})
            coll = sess.run(tv.get_collection("outputs")[0], {{"n:0": 5}})
        print(json.dumps({{"out": out.tolist(), "coll": coll.tolist()}}))
        """)
    np.testing.assert_allclose(got["out"], want, rtol=1e-6)
    np.testing.assert_allclose(got["coll"], want, rtol=1e-6)


def test_dynamic_rnn_lstm_restored_in_a_fresh_process(tmp_path):
    rng = np.random.RandomState(0)
    xs = rng.randn(3, 5, 4).astype(np.float32)
    ys = rng.randn(3, 6).astype(np.float32)
    g = tv.Graph()
    with g.as_default():
        tv.set_random_seed(1)
        x = tv.placeholder(tv.float32, [None, 5, 4], name="x")
        y = tv.placeholder(tv.float32, [None, 6], name="y")
        cell = tv.nn.rnn_cell.BasicLSTMCell(6)
        outs, state = tv.nn.dynamic_rnn(cell, x, dtype=tv.float32)
        last = tv.identity(outs[:, -1, :], name="output")
        loss = tv.reduce_mean(tv.square(last - y), name="loss")
        train = tv.train.GradientDescentOptimizer(0.5).minimize(loss, name="train")
        tv.add_to_collection("train_op", train)
        saver = tv.train.Saver()
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            for _ in range(3):
                sess.run(train, {x: xs, y: ys})
            ckpt = saver.save(sess, str(tmp_path / "ckpt" / "model"), global_step=3,
                              write_meta_graph=True)
            want_out = sess.run(last, {x: xs})
            want_loss = sess.run(loss, {x: xs, y: ys})
            sess.run(train, {x: xs, y: ys})
            want_after = sess.run(loss, {x: xs, y: ys})
    assert os.path.exists(str(tmp_path / "ckpt" / "model-3.meta"))
    got = _run_child(tmp_path, f"""
        import json, numpy as np, tensorvm as tv
        xs = np.array({xs.tolist()!r}, dtype=np.float32)
        ys = np.array({ys.tolist()!r}, dtype=np.float32)
        saver = tv.train.import_meta_graph({ckpt + ".meta"!r})
        g = tv.get_default_graph()
        train = tv.get_collection("train_op")[0]
        with tv.Session() as sess:
            saver.restore(sess, {ckpt!r})
            out = sess.run(g.get_tensor_by_name("output:0"), {{"x:0": xs}})
            loss = sess.run("loss:0", {{"x:0": xs, "y:0": ys}})
            sess.run(train, {{"x:0": xs, "y:0": ys}})
            after = sess.run("loss:0", {{"x:0": xs, "y:0": ys}})
            n_vars = len(tv.trainable_variables())
        print(json.dumps({{"out": out.tolist(), "loss": float(loss), "after": float(after),
                          "n_vars": n_vars}}))
        """)
    np.testing.assert_allclose(got["out"], want_out, rtol=1e-5, atol=1e-6)
    assert got["loss"] == pytest.approx(float(want_loss), rel=1e-5)
    assert got["after"] == pytest.approx(float(want_after), rel=1e-4)
    assert got["after"] < got["loss"]
    assert got["n_vars"] == 2  # the LSTM's kernel and bias


def test_tensor_array_loop_in_a_fresh_process(tmp_path):
    g = tv.Graph()
    with g.as_default():
        k = tv.placeholder(tv.float32, [], name="k")
        ta = tv.TensorArray(tv.float32, size=4)

        def body(i, ta):
            return i + 1, ta.write(i, tv.cast(i, tv.float32) * k)
        _, ta = tv.while_loop(lambda i, ta: i < 4, body, [0, ta])
        tv.identity(ta.stack(), name="stacked")
        path = str(tmp_path / "ta.meta")
        tv.train.export_meta_graph(path)
    got = _run_child(tmp_path, f"""
        import json, tensorvm as tv
        tv.train.import_meta_graph({path!r})
        with tv.Session() as sess:
            out = sess.run("stacked:0", {{"k:0": 2.5}})
        print(json.dumps({{"out": out.tolist()}}))
        """)
    np.testing.assert_allclose(got["out"], [0.0, 2.5, 5.0, 7.5])


def test_tf_data_initializable_iterator_in_a_fresh_process(tmp_path):
    g = tv.Graph()
    with g.as_default():
        p = tv.placeholder(tv.float32, [None], name="data")
        scale = tv.placeholder_with_default(tv.constant(3.0), [], name="scale")
        ds = tv.data.Dataset.from_tensor_slices(p).map(lambda v: v * scale) \
            .filter(lambda v: v > 4.0).batch(2)
        it = ds.make_initializable_iterator()
        nxt = tv.identity(it.get_next(), name="next")
        tv.add_to_collection("iterator_init", it.initializer)
        table = tv.data.Dataset.from_tensor_slices(
            (np.arange(4, dtype=np.int64), np.array(["a", "b", "c", "d"], dtype=object)))
        t_next = table.repeat(2).make_one_shot_iterator().get_next()
        tv.identity(t_next[0], name="ids")
        tv.identity(t_next[1], name="names")
        path = str(tmp_path / "data.meta")
        tv.train.export_meta_graph(path)
    got = _run_child(tmp_path, f"""
        import json, tensorvm as tv
        tv.train.import_meta_graph({path!r})
        init = tv.get_collection("iterator_init")[0]
        out = []
        with tv.Session() as sess:
            sess.run(init, {{"data:0": [1.0, 2.0, 3.0, 0.5, 4.0]}})
            try:
                while True:
                    out.append(sess.run("next:0").tolist())
            except tv.errors.OutOfRangeError:
                pass
            rows = [sess.run(["ids:0", "names:0"]) for _ in range(8)]
            try:
                sess.run("ids:0")
                ended = False
            except tv.errors.OutOfRangeError:
                ended = True
        print(json.dumps({{"out": out, "ids": [int(r[0]) for r in rows],
                          "names": [r[1].decode() if isinstance(r[1], bytes) else str(r[1])
                                    for r in rows], "ended": ended}}))
        """)
    assert got["out"] == [[6.0, 9.0], [12.0]]
    assert got["ids"] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert got["names"] == list("abcdabcd")
    assert got["ended"]


# ---- Saver.save and the meta graph -----------------------------------------------------------

def test_saver_save_writes_the_meta_graph_by_default_and_tracks_collections(tmp_path):
    g = tv.Graph()
    with g.as_default():
        v = tv.Variable([1.0, 2.0], name="v")
        out = tv.identity(v * 3.0, name="out")
        saver = tv.train.Saver()
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            p1 = saver.save(sess, str(tmp_path / "m"), global_step=1)
            tv.add_to_collection("outs", out)  # no new op: the graph version is unchanged
            p2 = saver.save(sess, str(tmp_path / "m"), global_step=2)
    m1 = json.loads(open(p1 + ".meta").read())
    m2 = json.loads(open(p2 + ".meta").read())
    assert "outs" not in m1["collection_def"]
    assert m2["collection_def"]["outs"] == [{"tensor": "out:0"}]
    with tv.Graph().as_default():
        saver2 = tv.train.import_meta_graph(p2 + ".meta")
        assert [x.name for x in tv.global_variables()] == ["v:0"]
        with tv.Session() as sess:
            saver2.restore(sess, p2)
            np.testing.assert_allclose(sess.run(tv.get_collection("outs")[0]), [3.0, 6.0])
            sess.run(tv.global_variables_initializer())  # the imported initializers run
            np.testing.assert_allclose(sess.run("v:0"), [1.0, 2.0])


def test_saver_save_with_a_py_func_graph(tmp_path, caplog):
    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(1.0, name="v")
        tv.py_func(lambda a: a, [v.value()], tv.float32, name="pyf")
        saver = tv.train.Saver()
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            with caplog.at_level("WARNING", logger="tensorvm"):
                path = saver.save(sess, str(tmp_path / "m"), global_step=1)
            assert not os.path.exists(path + ".meta")
            assert "pyf" in caplog.text and "no meta graph" in caplog.text
            with pytest.raises(tv.errors.InvalidArgumentError, match="pyf"):
                saver.save(sess, str(tmp_path / "m"), global_step=2, write_meta_graph=True)


def test_gradients_built_after_import_go_through_the_loop():
    g = tv.Graph()
    with g.as_default():
        w = tv.Variable(2.0, name="w")
        _, y = tv.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * w), [0, 1.0])
        tv.identity(y, name="y")
        meta = tv.train.export_meta_graph()
    with tv.Graph().as_default():
        tv.train.import_meta_graph(json.loads(json.dumps(meta)))
        w2 = tv.trainable_variables()[0]
        y2 = tv.get_default_graph().get_tensor_by_name("y:0")
        (dw,) = tv.gradients(y2, [w2])
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            assert float(sess.run(y2)) == 8.0
            assert float(sess.run(dw)) == pytest.approx(3 * 2.0 ** 2)


def test_cond_inside_a_loop_body_round_trips():
    g = tv.Graph()
    with g.as_default():
        def body(i, a):
            return i + 1, tv.cond(tv.equal(i % 2, 0), lambda: a + 10, lambda: a - 1)
        _, r = tv.while_loop(lambda i, a: i < 5, body, [0, 0])
        tv.identity(r, name="r")
    g2 = graph_from_dict(json.loads(json.dumps(g.as_graph_def())))
    with tv.Session(graph=g2) as sess:
        assert int(sess.run(g2.get_tensor_by_name("r:0"))) == 10 - 1 + 10 - 1 + 10


def test_queue_runners_are_restored_and_start():
    g = tv.Graph()
    with g.as_default():
        q = tv.FIFOQueue(8, tv.float32, shapes=[[]], name="q")
        counter = tv.Variable(0.0, name="counter")
        enq = q.enqueue(counter.assign_add(1.0))
        tv.train.add_queue_runner(tv.train.QueueRunner(q, [enq]))
        tv.identity(q.dequeue(), name="deq")
        meta = json.loads(json.dumps(tv.train.export_meta_graph()))
    assert meta["collection_def"][tv.train.QUEUE_RUNNERS][0]["queue_runner"]["queue"] == "q"
    with tv.Graph().as_default():
        tv.train.import_meta_graph(meta)
        (qr,) = tv.get_collection(tv.train.QUEUE_RUNNERS)
        assert qr.queue.name == "q" and [op.name for op in qr.enqueue_ops] == [enq.name]
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            coord = tv.train.Coordinator()
            threads = tv.train.start_queue_runners(sess, coord)
            got = [float(sess.run("deq:0")) for _ in range(5)]
            coord.request_stop()
            coord.join(threads)
    assert got == [1.0, 2.0, 3.0, 4.0, 5.0]


def _mutations(obj, rng, n):
    """``n`` copies of ``obj`` with one value somewhere replaced by a wrong-typed one."""
    paths = []

    def walk(o, path):
        paths.append(path)
        if isinstance(o, dict):
            for k, v in o.items():
                walk(v, path + (k,))
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, path + (i,))
    walk(obj, ())
    junk = [None, 7, -1, "x", "zz:9", [], {}, [1, "a"], {"__ndarray__": "<f4"}, 1.5, True,
            {"__tuple__": 3}, {"__func__": {}}, {"__stage__": "Batch", "fields": {}}]
    for _ in range(n):
        m = json.loads(json.dumps(obj))
        path = paths[rng.randint(1, len(paths))]
        parent = m
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = junk[rng.randint(len(junk))]
        yield path, m


def test_damaged_meta_graphs_fail_with_tensorvm_errors_only():
    """Every value replaced, one at a time, by a wrong one: import either works or raises a
    tv.errors class (never a TypeError/KeyError/AttributeError from deep inside)."""
    g = tv.Graph()
    with g.as_default():
        p = tv.placeholder(tv.float32, [None], name="p")
        w = tv.Variable(1.5, name="w")
        _, y = tv.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a * w), [0, p])
        ds = tv.data.Dataset.from_tensor_slices(np.arange(4.0)).map(lambda v: v + 1.0)
        ds.make_one_shot_iterator().get_next()
        tv.train.GradientDescentOptimizer(0.1).minimize(tv.reduce_sum(y))
        meta = tv.train.export_meta_graph(saver_def=tv.train.Saver().saver_def)
    rng = np.random.RandomState(0)
    for path, bad in _mutations(meta, rng, 300):
        with tv.Graph().as_default():
            try:
                tv.train.import_meta_graph(bad)
            except tv.errors.OpError:
                pass
            except Exception as e:  # pragma: no cover - the failure message
                raise AssertionError(f"mutating {path}: {type(e).__name__}: {e}") from e


def test_pruned_checkpoints_lose_their_meta_graphs(tmp_path):
    with tv.Graph().as_default():
        v = tv.Variable(0.0, name="v")
        saver = tv.train.Saver(max_to_keep=2)
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            for step in range(4):
                saver.save(sess, str(tmp_path / "m"), global_step=step)
    names = sorted(os.listdir(tmp_path))
    assert [n for n in names if n.endswith(".meta")] == ["m-2.meta", "m-3.meta"]
    assert "m-3" in names and "m-0" not in names
