"""tensorvm's worker state is one extension at ``worker.extensions["tensorvm"]``, installed by one
plugin whose name, like the direct plane's handlers, carries the tensorvm version; a client and
workers of different versions fail at connect with one error naming both (issue 22 item 4).

The cluster runs in this process (``processes=False``), so a test can look at the Worker and
Client objects themselves and fake what the workers report."""
from __future__ import annotations

import numpy as np
import pytest
from distributed import Client, LocalCluster

import tensorvm as tv
from tensorvm.runtime import wire_names, worker_extension
from tensorvm.runtime.worker_extension import TensorvmExtension, TensorvmWorkerPlugin


@pytest.fixture(scope="module")
def inproc():
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=False, protocol="tcp://",
                      host="127.0.0.1", dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield cluster, client


def _private_attrs(obj) -> list:
    return sorted(k for k in vars(obj) if "tensorvm" in k)


def test_worker_state_lives_in_one_extension(inproc):
    cluster, client = inproc
    with tv.Graph().as_default():
        with tv.device("/job:worker/task:0"):
            v = tv.Variable(np.arange(3.0), name="v")
        with tv.device("/job:worker/task:1"):
            out = v * 2.0
        with tv.Session(client=client, cluster={"worker": 2}, verbose=False) as sess:
            sess.run(v.initializer)
            for _ in range(3):  # the first run on Dask, the next ones on the direct plane
                np.testing.assert_array_equal(sess.run(out), [0.0, 2.0, 4.0])
    for worker in cluster.workers.values():
        ext = worker.extensions["tensorvm"]
        assert isinstance(ext, TensorvmExtension) and ext.version == tv.__version__
        assert wire_names.WORKER_PLUGIN in worker.plugins
        assert wire_names.handler("run") in worker.handlers and "tvm_run" not in worker.handlers
        assert _private_attrs(worker) == []
    assert _private_attrs(client) == []


def test_a_worker_of_another_version_fails_the_session_at_connect(inproc, monkeypatch):
    _, client = inproc
    # what the workers report: the package's __version__ (this process's client side reads
    # tensorvm.framework.versions, which keeps the real one)
    monkeypatch.setattr(tv, "__version__", "0.0.9")
    # a worker process's version never changes, so check_versions asks each one once per
    # process: forget the answers of the sessions before (same workers, real version)
    monkeypatch.setattr(worker_extension, "_SAME_VERSION", {})
    with pytest.raises(tv.errors.FailedPreconditionError) as e:
        tv.Session(client=client, verbose=False)
    msg = str(e.value)
    assert f"this client runs tensorvm {wire_names.VERSION}" in msg
    assert msg.count("runs tensorvm 0.0.9") == 2  # each worker named, with its version


def test_the_plugin_refuses_a_client_of_another_version(inproc):
    _, client = inproc
    plugin = TensorvmWorkerPlugin()
    plugin.client_version = "9.9.9"  # as made by a client of another version
    with pytest.raises(tv.errors.FailedPreconditionError, match=r"client runs tensorvm 9\.9\.9.*"
                       rf"runs tensorvm {wire_names.VERSION}"):
        client.register_plugin(plugin, name="tensorvm-9.9.9")
    client.unregister_worker_plugin("tensorvm-9.9.9")
