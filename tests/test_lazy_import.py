"""``import tensorvm`` leaves the upper layers for later (PEP 562 ``__getattr__`` on the
package and on ``tensorvm.storage``): every public name still resolves, pickles by reference,
and an op type of a module not imported yet is loaded where it is looked up — in a Dask worker
process whose first plan holds it, or in a GraphDef being imported.

Each check runs in a fresh interpreter (``sys.modules`` of this test process already holds
everything)."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

import tensorvm as tv

# What ``import tensorvm`` leaves for first use (each pulls in more: absl, the Saver, …).
LATER = ("tensorvm.train", "tensorvm.estimator", "tensorvm.estimator.feature_column",
         "tensorvm.tf_api.data", "tensorvm.ops.data.iterator_ops", "tensorvm.tf_api.app",
         "absl.flags", "tensorvm.storage.checkpoint", "tensorvm.storage.inspection")


def _python(code: str) -> str:
    """Run ``code`` in a fresh interpreter; its stdout (its stderr shown on failure)."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _loaded_after(statement: str) -> list:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    return json.loads(_python(code).splitlines()[-1])


@pytest.mark.parametrize("statement", ["import tensorvm",
                                       "import tensorvm.runtime.worker_extension",
                                       "import tensorvm.storage"])
def test_import_leaves_upper_layers_for_later(statement):
    loaded = set(_loaded_after(statement))
    assert not loaded & set(LATER), sorted(loaded & set(LATER))


def test_lazy_names_load_on_first_use_and_are_the_modules_objects():
    out = _python("""
import sys, json
import tensorvm as tv
import tensorvm.storage as st
before = {m for m in sys.modules}
got = {"train": tv.train is sys.modules["tensorvm.train"],
       "estimator": tv.estimator is sys.modules["tensorvm.estimator"],
       "feature_column": tv.feature_column is sys.modules["tensorvm.estimator.feature_column"],
       "data": tv.data is sys.modules["tensorvm.tf_api.data"],
       "app": tv.app is sys.modules["tensorvm.tf_api.app"],
       "flags": tv.flags is sys.modules["tensorvm.tf_api.app"].flags,
       "Saver": tv.train.Saver.__module__ == "tensorvm.train.saver",
       "old path": __import__("tensorvm.data").data is tv.data,
       "latest_checkpoint": st.latest_checkpoint
                            is sys.modules["tensorvm.storage.checkpoint"].latest_checkpoint,
       "verify_checkpoint": st.verify_checkpoint
                            is sys.modules["tensorvm.storage.inspection"].verify_checkpoint}
print(json.dumps(got))
""")
    got = json.loads(out.splitlines()[-1])
    assert got == {k: True for k in got}, got


def test_every_public_name_resolves_and_star_import_gives_them_all():
    out = _python("""
import json
import tensorvm as tv
import tensorvm.storage as st
missing = [n for n in tv.__all__ if not hasattr(tv, n)]
missing += ["storage." + n for n in st.__all__ if not hasattr(st, n)]
undir = sorted((set(tv.__all__) - set(dir(tv)))
               | {"storage." + n for n in set(st.__all__) - set(dir(st))})
ns = {}
exec("from tensorvm import *", ns)
print(json.dumps([missing, undir, sorted(set(tv.__all__) - set(ns)), len(tv.__all__)]))
""")
    missing, undir, unstarred, count = json.loads(out.splitlines()[-1])
    assert (missing, undir, unstarred) == ([], [], [])
    assert count == len(tv.__all__)  # the same names in a fresh process as in this one
    for name in ("train", "estimator", "feature_column", "data", "app", "flags", "matmul",
                 "Session", "io", "image", "summary"):
        assert name in tv.__all__


def test_functions_of_lazy_modules_pickle_by_reference():
    out = _python("""
import sys, cloudpickle
import tensorvm as tv
payload = cloudpickle.dumps([tv.train.exponential_decay, tv.train.Saver,
                             tv.estimator.RunConfig, tv.data.Dataset])
sys.stdout.write(payload.hex())
""")
    payload = bytes.fromhex(out.strip())
    assert b"tensorvm.train.learning_rate" in payload and len(payload) < 1000  # by reference
    got = _python(f"""
import pickle
objs = pickle.loads(bytes.fromhex({payload.hex()!r}))
print([f"{{o.__module__}}.{{o.__qualname__}}" for o in objs])
""")
    assert got.strip() == str(["tensorvm.train.learning_rate.exponential_decay",
                               "tensorvm.train.saver.Saver",
                               "tensorvm.estimator.run_config.RunConfig",
                               "tensorvm.ops.data.dataset_ops.Dataset"])


def test_a_missing_op_type_loads_the_lazy_op_modules():
    """``get_op_def`` of an op that a lazily loaded module registers: the table then holds
    every op type (and GPU kernel) a full import gives, as before."""
    code = """
import json, sys
import tensorvm as tv
from tensorvm.framework.op_registry import get_op_def, registry
absent = "SaveShard" not in registry and "IteratorV2" not in registry
{body}
gpu = sorted(t for t, d in registry.items() if "GPU" in d.kernels)
print(json.dumps([absent, sorted(registry), gpu, "tensorvm.train" in sys.modules]))
"""
    lazy = json.loads(_python(code.format(body='get_op_def("SaveShard")')).splitlines()[-1])
    full = json.loads(_python(code.format(body="tv.train, tv.data")).splitlines()[-1])
    assert lazy[0] and lazy[3]
    assert lazy[1] == full[1] and lazy[2] == full[2]
    assert "IteratorV2" in lazy[1]
    out = _python("""
from tensorvm.framework.op_registry import get_op_def
try:
    get_op_def("NoSuchOpAnywhere")
except Exception as e:
    print(type(e).__name__, e)
""")
    assert out.strip() == "NotFoundError no op type 'NoSuchOpAnywhere' is registered"


def test_graph_def_with_ops_of_a_lazy_module_imports_in_a_fresh_process(tmp_path):
    from tensorvm.framework.graph_def import graph_to_dict
    g = tv.Graph()
    with g.as_default():
        it = tv.data.Dataset.from_tensor_slices(np.arange(6)).batch(3).make_one_shot_iterator()
        nxt = it.get_next()
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(graph_to_dict(g)))
    out = _python(f"""
import json, sys
import tensorvm as tv
from tensorvm.framework.graph_def import graph_from_dict
assert "tensorvm.ops.data.iterator_ops" not in sys.modules
g = graph_from_dict(json.loads(open({str(path)!r}).read()))
with tv.Session(graph=g) as s:
    print(s.run(g.get_tensor_by_name({nxt.name!r})).tolist())
""")
    assert out.strip() == "[0, 1, 2]"


def test_a_fresh_worker_process_runs_ops_of_a_module_it_has_not_imported():
    """A plan unpickled in a Dask worker names its ops by type; the worker imported tensorvm
    lazily (with the worker plugin), so the op's module loads when the kernel table misses it.
    The plugin also warms the worker before its first task (the BLAS thread limit)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from hand_cluster import HandCluster

    def _blas_limited():
        import sys
        return "threadpoolctl" in sys.modules  # imported by tensorvm only to set the limit

    def _modules_of_interest():  # defined here: pickled by value for the worker
        import sys
        return sorted(m for m in ("tensorvm.ops.data.iterator_ops", "tensorvm.train")
                      if m in sys.modules)

    with tempfile.TemporaryDirectory() as folder, HandCluster(Path(folder)) as hc:
        hc.start_worker("worker-0")
        hc.wait_for(("worker-0",))
        g = tv.Graph()
        with g.as_default(), tv.device("/job:worker/task:0"):
            x = tv.placeholder(tv.int64, [])
            plain = x + 1
            it = tv.data.Dataset.from_tensor_slices(np.arange(6)).batch(3) \
                .make_one_shot_iterator()
            nxt = it.get_next()
        with tv.Session(hc.address, graph=g, verbose=False) as s:
            address = hc.workers()["worker-0"]
            # the plugin's setup warms the worker beside its start: the BLAS thread limit,
            # which its first task did cold (threadpoolctl's scan), is set before any task
            deadline = time.monotonic() + 60
            while not hc.client.run(_blas_limited, workers=[address])[address]:
                assert time.monotonic() < deadline, "the worker's BLAS limit was never set"
                time.sleep(0.05)
            assert s.run(plain, {x: 1}) == 2
            assert hc.client.run(_modules_of_interest, workers=[address])[address] == []
            np.testing.assert_array_equal(s.run(nxt), [0, 1, 2])
            np.testing.assert_array_equal(s.run(nxt), [3, 4, 5])
            loaded = hc.client.run(_modules_of_interest, workers=[address])[address]
            assert loaded == ["tensorvm.ops.data.iterator_ops", "tensorvm.train"]
