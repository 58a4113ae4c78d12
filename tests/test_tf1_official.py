"""TensorFlow's own 1.x MNIST tutorial programs, run unchanged with ``tensorvm tf PROGRAM.py``.

The programs live in ``tests/tf1_programs/official/`` (see its README: their upstream source
and why they are not committed); each test skips where its program is absent. The data is a
synthetic MNIST written as the real IDX ``.gz`` files: ten random binary 28x28 prototypes
plus uniform noise, so a model that learns beats chance by far. "Chance" is the frequency of
the test set's commonest class and the margin four binomial standard errors of it, both
computed from the labels written. Every program runs in a subprocess with its own flags
keeping it short; ``mnist_deep.py`` hard-codes 20000 steps and has no flag for it, so only it
runs under the shim's testing knob ``TENSORVM_TF_RANGE_LIMIT``. ``word2vec_basic.py`` (the r1.x
version that checks text8.zip's size only) reads a pre-placed synthetic ``text8.zip`` and is
stopped after 2000 of its hard-coded 100001 steps (a ``six.moves.xrange`` loop, which the knob
does not reach).
"""
from __future__ import annotations

import glob
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from tensorvm.tutorials.mnist.input_data import write_idx

OFFICIAL = Path(__file__).parent / "tf1_programs" / "official"
TENSORVM = Path(sys.executable).parent / "tensorvm"
N_TRAIN, N_TEST = 5600, 500  # read_data_sets keeps 5000 training images for validation


def program(name: str) -> Path:
    path = OFFICIAL / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (TensorFlow's tutorial is not committed: see "
                    f"{OFFICIAL / 'README.md'})")
    return path


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory):
    """Synthetic MNIST files; returns (directory, chance accuracy, margin)."""
    d = tmp_path_factory.mktemp("mnist")
    protos = (np.random.RandomState(0).rand(10, 28, 28) < 0.25) * 255.0

    def make(n, seed):
        rng = np.random.RandomState(seed)
        labels = rng.randint(0, 10, n)
        images = 0.6 * protos[labels] + 100 * rng.rand(n, 28, 28)
        return np.clip(images, 0, 255).astype(np.uint8), labels.astype(np.uint8)

    train_x, train_y = make(N_TRAIN, 1)
    test_x, test_y = make(N_TEST, 2)
    write_idx(str(d / "train-images-idx3-ubyte.gz"), train_x)
    write_idx(str(d / "train-labels-idx1-ubyte.gz"), train_y)
    write_idx(str(d / "t10k-images-idx3-ubyte.gz"), test_x)
    write_idx(str(d / "t10k-labels-idx1-ubyte.gz"), test_y)
    chance = np.bincount(test_y, minlength=10).max() / N_TEST
    return d, chance, 4 * math.sqrt(chance * (1 - chance) / N_TEST)


def run_tf(path: Path, *args: str, env: dict | None = None, cwd=None) -> str:
    proc = subprocess.run([str(TENSORVM), "tf", str(path), *args], capture_output=True,
                          text=True, timeout=240, cwd=cwd,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return proc.stdout


def events(logdir):
    """TensorBoard's own reader over ``logdir``."""
    ea_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    ea = ea_mod.EventAccumulator(str(logdir), size_guidance={
        ea_mod.IMAGES: 0, ea_mod.SCALARS: 0, ea_mod.HISTOGRAMS: 0})
    ea.Reload()
    return ea


def test_mnist_softmax(mnist_dir):
    data, chance, margin = mnist_dir
    out = run_tf(program("mnist_softmax.py"), "--data_dir", str(data))
    accuracy = float(out.strip().splitlines()[-1])
    assert accuracy > chance + margin, out


def test_fully_connected_feed_trains_and_writes_summaries_and_checkpoints(mnist_dir, tmp_path):
    data, chance, margin = mnist_dir
    program("mnist.py")
    log_dir = tmp_path / "logs"
    out = run_tf(program("fully_connected_feed.py"), "--input_data_dir", str(data),
                 "--log_dir", str(log_dir), "--max_steps", "150", "--learning_rate", "0.1")
    precisions = [float(p) for p in re.findall(r"Precision @ 1: ([0-9.]+)", out)]
    assert len(precisions) == 3, out  # train, validation, test
    assert min(precisions) > chance + margin, out
    losses = [float(v) for v in re.findall(r"Step \d+: loss = ([0-9.]+)", out)]
    assert len(losses) == 2 and losses[1] < losses[0], out

    import tensorvm as tv
    from tensorvm.storage.checkpoint import read_tensors
    ckpt = tv.train.latest_checkpoint(str(log_dir))
    assert ckpt is not None and ckpt.endswith("model.ckpt-149"), ckpt
    tensors = read_tensors(ckpt)
    assert int(tensors["global_step"]) == 150
    assert tensors["hidden1/weights"].shape == (784, 128)
    assert tensors["softmax_linear/biases"].shape == (10,)
    ea = events(log_dir)
    assert [e.step for e in ea.Scalars("loss")] == [0, 100]
    logged = [e.value for e in ea.Scalars("loss")]  # after each step's update: not the print
    assert logged[1] < logged[0] < losses[0] + 0.01 and abs(logged[1] - losses[1]) < 0.1
    assert ea.Graph() is not None


def test_mnist_with_summaries(mnist_dir, tmp_path):
    data, chance, margin = mnist_dir
    log_dir = tmp_path / "summaries"
    out = run_tf(program("mnist_with_summaries.py"), "--data_dir", str(data), "--log_dir",
                 str(log_dir), "--max_steps", "101")
    accuracies = {int(s): float(a) for s, a in re.findall(r"Accuracy at step (\d+): ([0-9.]+)",
                                                           out)}
    assert sorted(accuracies) == list(range(0, 101, 10)), out
    assert accuracies[100] > chance + margin, out
    assert "Adding run metadata for 99" in out
    test, train = events(log_dir / "test"), events(log_dir / "train")
    tags = test.Tags()
    accuracy_tag = next(t for t in tags["scalars"] if t.startswith("accuracy"))
    np.testing.assert_allclose([e.value for e in test.Scalars(accuracy_tag)],
                               [accuracies[s] for s in sorted(accuracies)], atol=1e-6)
    assert {"layer1/weights/summaries/histogram", "layer2/activations"} <= set(tags["histograms"])
    assert any(t.startswith("input_reshape/input/image") for t in tags["images"])
    assert len(train.Scalars("dropout/dropout_keep_probability")) == 90
    assert "step099" in train.Tags()["run_metadata"]


def test_mnist_softmax_xla_writes_a_chrome_trace(mnist_dir, tmp_path):
    data, chance, margin = mnist_dir
    out = run_tf(program("mnist_softmax_xla.py"), "--data_dir", str(data), cwd=tmp_path)
    assert float(out.strip().splitlines()[-1]) > chance + margin, out
    trace = json.loads((tmp_path / "timeline.ctf.json").read_text())["traceEvents"]
    ops = [op for e in trace if e["ph"] == "X" for op in e["args"]["ops"]]
    assert "MatMul" in ops and any(e["ph"] == "M" for e in trace)


def test_mnist_deep_with_the_range_knob(mnist_dir):
    data, chance, margin = mnist_dir
    out = run_tf(program("mnist_deep.py"), "--data_dir", str(data),
                 env={"TENSORVM_TF_RANGE_LIMIT": "10"})
    assert "step 0, training accuracy" in out
    graph_dir = re.search(r"Saving graph to: (\S+)", out).group(1)
    assert glob.glob(os.path.join(graph_dir, "events.out.tfevents.*"))
    accuracy = float(re.search(r"test accuracy ([0-9.]+)", out).group(1))
    assert accuracy > chance + margin, out


def _synthetic_text8(path: Path, n_words: int = 400_000) -> None:
    """A zip of exactly text8.zip's size (31344016 bytes, all that word2vec_basic.py checks):
    its first member is a text of word pairs (w2k, w2k+1), each word once and then drawn from
    a Zipf law over 60000 words, the second stored random bytes filling the size."""
    size = 31344016
    rng = np.random.RandomState(0)
    p = 1.0 / np.arange(1, 60001)
    ids = np.concatenate([np.arange(0, 60000, 2),  # every word at least once (the program
                          rng.choice(60000, n_words // 2, p=p / p.sum())])  # names 50000)
    words = np.stack([ids, ids ^ 1], axis=1).ravel()
    text = " ".join(f"w{i}" for i in words.tolist()).encode()

    def build(pad: int) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
            z.writestr("text8", text)
            z.writestr("pad", rng.bytes(pad))
        return out.getvalue()
    data = build(0)
    data = build(size - len(data))
    assert len(data) == size
    path.write_bytes(data)


def test_word2vec_basic_trains_on_a_pre_placed_text8(tmp_path):
    path = program("word2vec_basic.py")
    _synthetic_text8(tmp_path / "text8.zip")  # where gettempdir() points the program
    proc = subprocess.Popen([str(TENSORVM), "tf", str(path), "--log_dir", str(tmp_path / "log")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path), "OMP_NUM_THREADS": "1"})
    lines, losses = [], {}
    try:
        for line in proc.stdout:
            lines.append(line)
            m = re.match(r"Average loss at step\s+(\d+)\s*:\s*([0-9.]+)", line)
            if m:
                losses[int(m.group(1))] = float(m.group(2))
                if int(m.group(1)) == 2000:
                    break
    finally:
        proc.send_signal(signal.SIGTERM)  # 100001 steps are hard-coded: stop it here
        _, err = proc.communicate(timeout=60)
    out = "".join(lines)
    assert "Found and verified text8.zip" in out and "Initialized" in out, out + err[-3000:]
    assert sorted(losses) == [0, 2000], out + err[-3000:]
    assert losses[2000] < 0.6 * losses[0], out
    assert sum(line.startswith("Nearest to w") for line in lines) == 16  # step 0's similarity
    assert proc.returncode == 143 and err.strip().endswith("tensorvm: terminated")
