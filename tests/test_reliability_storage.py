"""Issue 24, items 5, 6 and 10: bounded metadata reads, concurrent savers, one error hierarchy.

The unbounded-read cases run in a child process whose address space is capped at 1.5 GiB above
what it holds after importing tensorvm (as the probe ran them), and with a wall-clock timeout,
so a regression fails the test instead of eating the machine's memory or hanging it.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tensorvm as tv
from tensorvm import storage
from tensorvm.storage import checkpoint_state, errors as storage_errors, tensor_bundle
from tensorvm.storage.index import INDEX_NAME

HERE = os.path.dirname(os.path.abspath(__file__))
TF_DATA = os.path.join(HERE, "data", "tf_ckpt")

_CHILD = """
import resource, sys, time, json
import tensorvm as tv
from tensorvm import storage
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
limit = vm + (3 << 29)   # 1.5 GiB above what the process holds now
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
t0 = time.monotonic()
try:
{body}
    out = {{"ok": True, "result": repr(result)}}
except BaseException as e:
    out = {{"ok": False, "type": type(e).__module__ + "." + type(e).__qualname__,
            "mro": [c.__module__ + "." + c.__qualname__ for c in type(e).__mro__],
            "message": str(e)}}
out["seconds"] = time.monotonic() - t0
out["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("RESULT " + json.dumps(out))
"""


def _run_capped(body: str, timeout: float = 60.0) -> dict:
    """Run ``body`` (which sets ``result``) in a child with a capped address space."""
    code = _CHILD.format(body=textwrap.indent(textwrap.dedent(body), "    "))
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the read did not return within {timeout} s (blocked on a FIFO?)")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"child died (rc {proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def _saved_dir(tmp_path) -> tuple[str, str]:
    """A folder with one committed tensorvm checkpoint; returns (folder, checkpoint url)."""
    d = str(tmp_path / "ckpts")
    ckpt = storage.checkpoint_url(d, "model.ckpt", 3)
    storage.commit(d, ckpt, storage.write_shard(ckpt, 0, 1, {"w": np.arange(4.0)}), step=3)
    return d, ckpt


# ---- item 5: every small metadata file is a regular file under a size cap ----------------------

def test_state_file_linked_to_dev_zero_is_ignored_with_a_warning(tmp_path):
    d, ckpt = _saved_dir(tmp_path)
    os.remove(os.path.join(d, "checkpoint"))
    os.symlink("/dev/zero", os.path.join(d, "checkpoint"))
    out = _run_capped(f"""
        import logging
        seen = []
        class H(logging.Handler):
            def emit(self, record): seen.append(record.getMessage())
        logging.getLogger("tensorvm").addHandler(H())
        latest = tv.train.latest_checkpoint({d!r})
        state = tv.train.get_checkpoint_state({d!r})
        result = (latest, state.model_checkpoint_path, seen)
        """)
    assert out["ok"], out
    assert out["seconds"] < 10, out
    latest, model, seen = eval(out["result"])
    assert latest == ckpt and model == ckpt  # the committed folders are the truth
    assert any(f"{d}/checkpoint" in m and "not a regular file" in m and
               f"at most {checkpoint_state.MAX_STATE_BYTES} bytes" in m for m in seen), seen


def test_state_file_as_a_fifo_does_not_block(tmp_path):
    d, ckpt = _saved_dir(tmp_path)
    os.remove(os.path.join(d, "checkpoint"))
    os.mkfifo(os.path.join(d, "checkpoint"))
    out = _run_capped(f"""
        result = (tv.train.latest_checkpoint({d!r}),
                  tv.train.get_checkpoint_state({d!r}).model_checkpoint_path,
                  storage.checkpoint_state.read_state({d!r}))
        """, timeout=30)
    assert out["ok"], out
    assert eval(out["result"]) == (ckpt, ckpt, None)


def test_huge_sparse_state_file_is_refused_by_its_size(tmp_path, caplog):
    d, ckpt = _saved_dir(tmp_path)
    with open(os.path.join(d, "checkpoint"), "r+b") as f:
        f.truncate(1 << 30)  # a regular file, 1 GiB, sparse: its size alone refuses it
    with caplog.at_level(logging.WARNING, logger="tensorvm"):
        assert tv.train.latest_checkpoint(d) == ckpt
        assert tv.train.get_checkpoint_state(d).model_checkpoint_path == ckpt
    text = caplog.text
    assert f"{checkpoint_state.MAX_STATE_BYTES} bytes" in text and "checkpoint" in text, text


def test_meta_graph_linked_to_dev_zero_is_data_loss(tmp_path):
    meta = str(tmp_path / "model.ckpt-3.meta")
    os.symlink("/dev/zero", meta)
    out = _run_capped(f"""
        result = tv.train.import_meta_graph({meta!r})
        """)
    assert not out["ok"] and out["type"] == "tensorvm.errors.DataLossError", out
    assert "tensorvm.errors.OpError" in out["mro"]
    assert meta in out["message"] and "not a regular file" in out["message"], out
    from tensorvm.train.meta_graph import MAX_META_GRAPH_BYTES
    assert f"at most {MAX_META_GRAPH_BYTES} bytes" in out["message"], out


def test_meta_graph_over_the_cap_is_data_loss(tmp_path, monkeypatch):
    from tensorvm.train import meta_graph
    with tv.Graph().as_default():
        tv.Variable(np.zeros(3), name="v")
        tv.train.export_meta_graph(str(tmp_path / "m.meta"))
    monkeypatch.setattr(meta_graph, "MAX_META_GRAPH_BYTES", 64)
    with tv.Graph().as_default(), pytest.raises(tv.errors.DataLossError) as info:
        tv.train.import_meta_graph(str(tmp_path / "m.meta"))
    assert "m.meta" in str(info.value) and "64 bytes" in str(info.value)
    # on memory:// (no FIFOs there) the cap holds the same way
    with tv.Graph().as_default():
        tv.Variable(np.zeros(3), name="v")
        tv.train.export_meta_graph("memory://tvm-rel-meta/m.meta")
    with tv.Graph().as_default(), pytest.raises(tv.errors.DataLossError, match="64 bytes"):
        tv.train.import_meta_graph("memory://tvm-rel-meta/m.meta")


def test_tf_index_linked_to_dev_zero_is_data_loss(tmp_path):
    prefix = str(tmp_path / "model.ckpt-7")
    for name in os.listdir(TF_DATA):
        if name.startswith("model.ckpt-7.data"):
            os.symlink(os.path.join(TF_DATA, name), str(tmp_path / name))
    os.symlink("/dev/zero", prefix + ".index")
    out = _run_capped(f"""
        result = tv.train.list_variables({prefix!r})
        """)
    assert not out["ok"] and out["type"] == "tensorvm.errors.DataLossError", out
    assert prefix + ".index" in out["message"], out
    assert f"at most {tensor_bundle.MAX_TABLE_BYTES} bytes" in out["message"], out


def test_tf_index_over_the_cap_is_data_loss(tmp_path, monkeypatch):
    import shutil
    shutil.copytree(TF_DATA, tmp_path / "tf")
    prefix = str(tmp_path / "tf" / "model.ckpt-7")
    assert dict(tv.train.list_variables(prefix))["w"] == [3, 2]
    monkeypatch.setattr(tensor_bundle, "MAX_TABLE_BYTES", 100)
    with pytest.raises(tv.errors.DataLossError) as info:
        tv.train.list_variables(prefix)
    assert prefix + ".index" in str(info.value) and "100 bytes" in str(info.value)


def test_tf_text_state_file_as_a_fifo_does_not_block(tmp_path):
    import shutil
    shutil.copytree(TF_DATA, tmp_path / "tf")
    state = tmp_path / "tf" / "checkpoint"
    if state.exists():
        state.unlink()
    os.mkfifo(state)
    out = _run_capped(f"""
        from tensorvm.storage import tensor_bundle
        result = tensor_bundle.tf_latest_checkpoint({str(tmp_path / 'tf')!r})
        """, timeout=30)
    assert out["ok"] and out["result"] == "None", out


def test_sparse_one_gib_index_is_refused_before_it_is_read(tmp_path):
    d, ckpt = _saved_dir(tmp_path)
    with open(os.path.join(ckpt, INDEX_NAME), "r+b") as f:
        f.truncate(1 << 30)
    out = _run_capped(f"""
        import resource
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            storage.read_index({ckpt!r})
        except tv.errors.DataLossError as e:
            result = (str(e), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
        """)
    assert out["ok"], out
    message, grown_kb = eval(out["result"])
    assert out["seconds"] < 2 and grown_kb < 100_000, out
    assert os.path.join(ckpt, INDEX_NAME) in message
    assert f"{storage.index.MAX_INDEX_BYTES} bytes" in message, message


def test_index_over_the_cap_on_memory_fs(monkeypatch):
    d = "memory://tvm-rel-index-cap"
    ckpt = storage.checkpoint_url(d, "m", 1)
    storage.commit(d, ckpt, storage.write_shard(ckpt, 0, 1, {"w": np.zeros(2)}), step=1)
    assert storage.read_index(ckpt)["step"] == 1
    monkeypatch.setattr(storage.index, "MAX_INDEX_BYTES", 50)
    with pytest.raises(tv.errors.DataLossError) as info:
        storage.read_index(ckpt)
    assert f"{ckpt}/index.json" in str(info.value) and "50 bytes" in str(info.value)


def test_index_as_a_fifo_is_data_loss_not_a_hang(tmp_path):
    d, ckpt = _saved_dir(tmp_path)
    os.remove(os.path.join(ckpt, INDEX_NAME))
    os.mkfifo(os.path.join(ckpt, INDEX_NAME))
    out = _run_capped(f"""
        result = storage.read_index({ckpt!r})
        """, timeout=30)
    assert not out["ok"] and "DataLossError" in out["type"], out
    assert "not a regular file" in out["message"], out
    assert f"at most {storage.index.MAX_INDEX_BYTES} bytes" in out["message"], out


# ---- item 6: concurrent savers never leave a pruned checkpoint in the state file ----------------

def _saver_thread(d: str, first_step: int, errors_out: list, barrier: threading.Barrier):
    try:
        with tv.Graph().as_default():
            v = tv.Variable(np.full(64, float(first_step)), name="v")
            saver = tv.train.Saver(max_to_keep=3)
            with tv.Session() as s:
                s.run(v.initializer)
                barrier.wait()
                for i in range(6):
                    saver.save(s, f"{d}/model.ckpt", global_step=first_step + i)
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors_out.append(e)


@pytest.mark.parametrize("run", range(3))
def test_concurrent_savers_never_list_a_pruned_checkpoint(tmp_path, run):
    """The probe's case (4 threads, each a Saver(max_to_keep=3), 6 saves each into one
    folder), four rounds a run: before the lock, about one round in four to ten listed a
    checkpoint another saver had pruned."""
    for round_no in range(4):
        d = str(tmp_path / f"shared{round_no}")
        failures: list = []
        barrier = threading.Barrier(4)
        threads = [threading.Thread(target=_saver_thread,
                                    args=(d, 1000 * (t + 1), failures, barrier))
                   for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not failures, failures
        state = tv.train.get_checkpoint_state(d)
        listed = state.all_model_checkpoint_paths
        gone = [p for p in listed if not os.path.exists(os.path.join(p, INDEX_NAME))]
        assert not gone, f"round {round_no}: the state lists pruned {gone} (of {listed})"
        with open(os.path.join(d, "checkpoint")) as f:
            raw = json.load(f)
        gone = [p for p in raw["all_model_checkpoint_paths"]
                if not os.path.exists(os.path.join(d, p, INDEX_NAME))]
        assert not gone, f"round {round_no}: the state file names pruned {gone}: {raw}"
        assert 1 <= len(raw["all_model_checkpoint_paths"]) <= 3
        latest = tv.train.latest_checkpoint(d)
        assert latest == state.model_checkpoint_path
        assert storage.read_tensors(latest)["v"].shape == (64,)


def test_a_commit_whose_checkpoint_another_saver_pruned_does_not_name_it(tmp_path, monkeypatch):
    """max_to_keep=1: another saver commits step 6 and prunes step 5 between step 5's index
    write and its state update; the state then names step 6, never the pruned step 5."""
    from tensorvm.storage.fsio import atomic_write_bytes, to_fs
    from tensorvm.storage.index import encode_index
    d = str(tmp_path / "c")
    early = storage.checkpoint_url(d, "model.ckpt", 5)
    late = storage.checkpoint_url(d, "model.ckpt", 6)
    entries = storage.write_shard(early, 0, 1, {"w": np.zeros(2)})
    late_entries = storage.write_shard(late, 0, 1, {"w": np.ones(2)})
    fs, path = to_fs(late)  # step 6's index, committed later than step 5's will be
    atomic_write_bytes(fs, f"{path}/{INDEX_NAME}", encode_index(late_entries, 6, 2e9, None))
    real_update = checkpoint_state.update_state

    def other_saver_first(dir_url, name, *a, **k):
        if name == "model.ckpt-5":  # the other saver's state update and prune run first
            assert real_update(dir_url, "model.ckpt-6", 1, None) == ["model.ckpt-5"]
            checkpoint_state.remove_checkpoint(early)
        return real_update(dir_url, name, *a, **k)

    monkeypatch.setattr(storage.checkpoint, "update_state", other_saver_first)
    storage.commit(d, early, entries, step=5, max_to_keep=1)
    with open(os.path.join(d, "checkpoint")) as f:
        raw = json.load(f)
    assert raw["model_checkpoint_path"] == "model.ckpt-6", raw
    assert raw["all_model_checkpoint_paths"] == ["model.ckpt-6"], raw
    assert tv.train.latest_checkpoint(d) == late


_PROC_SAVER = """
import os, sys, time
import numpy as np
from tensorvm import storage
from tensorvm.storage import checkpoint_state

d, step, role, flags = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def wait_for(path, seconds):
    end = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.01)
    return os.path.exists(path)

if role == "first":  # list the committed folders, then give the other saver 3 s to cut in
    real = checkpoint_state.committed_checkpoints
    def listing_then_pause(*a, **k):
        out = real(*a, **k)
        open(flags + ".listed", "w").close()
        print("other saver cut in:", wait_for(flags + ".done", 3.0), flush=True)
        return out
    checkpoint_state.committed_checkpoints = listing_then_pause
else:
    assert wait_for(flags + ".listed", 120)
ckpt = storage.checkpoint_url(d, "model.ckpt", step)
storage.commit(d, ckpt, storage.write_shard(ckpt, 0, 1, {"w": np.zeros(8)}), step=step,
               max_to_keep=2)
open(flags + (".first" if role == "first" else ".done"), "w").close()
"""


def test_savers_in_two_processes_never_list_a_pruned_checkpoint(tmp_path):
    """Saver A (another process) has listed the folders when saver B commits, prunes and
    writes its state; before the directory lock, A then wrote a list naming a checkpoint B had
    just pruned. Now B waits for A's lock (A pauses 3 s for it in vain)."""
    d = str(tmp_path / "shared")
    for step in (1, 2):
        ckpt = storage.checkpoint_url(d, "model.ckpt", step)
        storage.commit(d, ckpt, storage.write_shard(ckpt, 0, 1, {"w": np.zeros(8)}),
                       step=step, max_to_keep=2)
    flags = str(tmp_path / "flag")
    procs = [subprocess.Popen([sys.executable, "-c", _PROC_SAVER, d, str(step), role, flags],
                              stdout=subprocess.PIPE, text=True)
             for step, role in ((3, "first"), (4, "second"))]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert "other saver cut in: False" in outs[0], outs  # B waited for A's lock
    with open(os.path.join(d, "checkpoint")) as f:
        raw = json.load(f)
    gone = [p for p in raw["all_model_checkpoint_paths"]
            if not os.path.exists(os.path.join(d, p, INDEX_NAME))]
    assert not gone, f"the state file names pruned checkpoints {gone}: {raw}"
    assert raw["all_model_checkpoint_paths"] == ["model.ckpt-3", "model.ckpt-4"], raw
    assert sorted(os.listdir(d)) == ["checkpoint", "model.ckpt-3", "model.ckpt-4"]


def test_a_state_file_naming_a_vanished_checkpoint_is_filtered_on_read(tmp_path):
    d, ckpt = _saved_dir(tmp_path)
    ckpt4 = storage.checkpoint_url(d, "model.ckpt", 4)
    storage.commit(d, ckpt4, storage.write_shard(ckpt4, 0, 1, {"w": np.zeros(2)}), step=4)
    checkpoint_state.remove_checkpoint(ckpt)  # e.g. pruned by a saver in another process
    assert checkpoint_state.read_state(d)["all_model_checkpoint_paths"] == ["model.ckpt-4"]
    assert tv.train.get_checkpoint_state(d).all_model_checkpoint_paths == [ckpt4]


# ---- item 10: one error hierarchy -----------------------------------------------------------

def test_storage_data_loss_is_tv_data_loss():
    assert storage_errors.DataLossError is tv.errors.DataLossError
    assert storage.DataLossError is tv.errors.DataLossError
    assert storage_errors.OpError is tv.errors.OpError
    err = storage_errors.DataLossError("checksum mismatch", "file:///c/data")
    assert err.url == "file:///c/data" and str(err) == "checksum mismatch: file:///c/data"
    assert err.error_code == tv.errors.DATA_LOSS and err.op is None
    tf_style = tv.errors.DataLossError(None, None, "torn")
    assert str(tf_style) == "torn" and tf_style.url is None
    assert issubclass(storage_errors.CheckpointNotFoundError, FileNotFoundError)


def test_an_uncommitted_output_read_as_input_is_caught_as_tv_data_loss(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-00000").write_text("a\nb\n")  # part files, no _SUCCESS: never committed
    (out / "_temporary").mkdir()  # ... by a job (a folder with neither is plain input)
    with pytest.raises(tv.errors.DataLossError, match="never committed") as info:
        storage.splits(str(out), format="text")
    assert info.value.url and str(out) in info.value.url


def test_a_file_missing_from_success_is_caught_as_tv_data_loss(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-00000").write_text("a\n")
    (out / "_SUCCESS").write_text(json.dumps({"files": ["part-00000", "part-00001"]}))
    try:
        storage.splits(str(out), format="text")
    except tv.errors.DataLossError as e:
        assert "part-00001" in str(e) and "missing" in str(e)
    else:
        pytest.fail("a committed output missing a listed file was read")


def test_a_torn_checkpoint_restore_is_tv_data_loss(tmp_path):
    d, ckpt = _saved_dir(tmp_path)
    index = storage.read_index(ckpt)
    path = os.path.join(ckpt, index["entries"][0]["file"])
    with open(path, "r+b") as f:
        f.seek(-1, 2)
        f.write(b"\x01")
    with pytest.raises(tv.errors.DataLossError, match="checksum mismatch"):
        storage.read_tensors(ckpt)
    with tv.Graph().as_default():
        w = tv.Variable(np.zeros(4), name="w")
        with tv.Session() as s, pytest.raises(tv.errors.DataLossError) as info:
            tv.train.Saver([w]).restore(s, ckpt)
    assert "checksum mismatch" in str(info.value) and ckpt in str(info.value)
