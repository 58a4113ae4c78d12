"""Shared fixtures.

``tv_cluster`` (module scope) starts one dask.distributed LocalCluster of worker *processes*
through ``tv.Session(cluster=spec)`` — workers named after their tasks (``ps-0``,
``worker-0`` …) — and shares it among the module's tests. A module picks its spec with a
``TV_CLUSTER = {"ps": 1, "worker": 2}`` global (that is the default). A module whose tests
kill no worker and leave no state behind sets ``TV_CLUSTER_SHARED = True``: it then gets the
one cluster of its spec that every such module shares, started once per test run. The fixture
gives:

* ``tv_cluster.session(graph=None, **kw)`` — a new ``tv.Session`` on the cluster (sharing the
  fixture's Dask client unless ``own_client=True``), closed when the test ends;
* ``tv_cluster.address``, ``.client``, ``.spec``, ``.worker(task_name)`` (its address);
  the ``cluster_handle`` fixture gives the class: ``cluster_handle(spec, address)`` wraps a
  cluster started elsewhere the same way;
* ``tv_cluster.kill(task_name)`` — SIGKILL that task's worker process (its Nanny restarts it
  with a new address); ``.wait_full()`` waits until every task has a worker again.

Each test that uses a session waits for a full cluster first, so a test that killed a worker
does not disturb the next one (state on the killed worker is gone, as on a real cluster).
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import sys
import tempfile
import time

import pytest

# Job event logs (tensorvm.scheduler_ext.history) go to a folder of this test run, never the
# user's ~/.local/share/tensorvm/history; every process the tests start inherits it.
_HISTORY = tempfile.mkdtemp(prefix="tvm-test-history-")
os.environ["TENSORVM_HISTORY"] = _HISTORY
atexit.register(shutil.rmtree, _HISTORY, ignore_errors=True)
# Nor does the suite ever run on a developer's `tensorvm up` cluster (tensorvm.jobs.local_up):
# its state folder is one of this test run (tests/test_local_up.py gives each test its own).
_STATE = tempfile.mkdtemp(prefix="tvm-test-state-")
os.environ["TENSORVM_STATE_DIR"] = _STATE
atexit.register(shutil.rmtree, _STATE, ignore_errors=True)

# Bytecode for the hundreds of processes the suite starts (each `tensorvm` command, each
# worker process of a LocalCluster): with PYTHONDONTWRITEBYTECODE set (as some sandboxes and
# CI images do) every one of them compiled tensorvm's ~280 modules from source again, ~0.35 s
# of CPU a process. The run writes and reads them under the environment's prefix instead
# (outside the source tree, which stays as clean as the variable meant; kept between runs,
# checked against each source's mtime as any .pyc is). This process too, from here on.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX") \
        and sys.prefix != sys.base_prefix and os.access(sys.prefix, os.W_OK):  # a venv
    _PYCACHE = os.path.join(sys.prefix, "pycache")
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE
    sys.dont_write_bytecode, sys.pycache_prefix = False, _PYCACHE

DEFAULT_CLUSTER = {"ps": 1, "worker": 2}


class ClusterHandle:
    """A running LocalCluster of named worker processes and helpers for tests."""

    def __init__(self, spec: dict, address: str | None = None):
        import tensorvm as tv
        self.spec = tv.train.ClusterSpec(spec)
        # With no address the root session starts the cluster; with one it joins it. Two
        # threads per worker, as the suite's tests were written for (a step beside a given-up
        # step's py_func still running); a session's own default is one thread per worker
        # when the workers fill the cores (tensorvm.runtime.cluster.local.worker_threads).
        import dask
        with dask.config.set({"tensorvm.worker-threads": 2}):
            self._root = tv.Session(address, cluster=self.spec, graph=tv.Graph(),
                                    verbose=False)
        self.client = self._root.client
        self.address = self.client.scheduler.address
        self._sessions: list = []

    def workers(self) -> dict:
        """Worker name -> address, as the scheduler knows them now."""
        # the scheduler's own answer: Client.scheduler_info returns a shared copy that the
        # client's periodic refresh (no workers listed) may overwrite as it returns (issue 24)
        info = self.client.sync(self.client.scheduler.identity, n_workers=-1)
        return {str(w["name"]): a for a, w in info["workers"].items()}

    def worker(self, task_name: str) -> str:
        return self.workers()[task_name]

    def wait_full(self, timeout: float = 60.0) -> None:
        want = set(self.spec.task_names())
        deadline = time.monotonic() + timeout
        while not want <= set(self.workers()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster did not recover: have {sorted(self.workers())}")
            time.sleep(0.1)

    def kill(self, task_name: str) -> str:
        """SIGKILL the worker process of ``task_name``; return its (old) address."""
        addr = self.worker(task_name)
        pid = self.client.run(os.getpid, workers=[addr])[addr]
        os.kill(pid, signal.SIGKILL)
        return addr

    def session(self, graph=None, own_client: bool = False, **kw):
        """A new session on the cluster (keyword arguments go to ``tv.Session``)."""
        import tensorvm as tv
        self.wait_full()
        kw.setdefault("verbose", False)
        kw.setdefault("cluster", self.spec)  # cluster=None: a session with no ClusterSpec
        if own_client:
            s = tv.Session(self.address, graph=graph, **kw)
        else:
            s = tv.Session(graph=graph, client=self.client, **kw)
        self._sessions.append(s)
        return s

    def close_sessions(self) -> None:
        while self._sessions:
            self._sessions.pop().close()

    def close(self) -> None:
        self.close_sessions()
        self._root.close()


@pytest.fixture
def g():
    """A fresh graph, the default one while the test runs."""
    import tensorvm as tv
    graph = tv.Graph()
    with graph.as_default():
        yield graph


@pytest.fixture(scope="session")
def cluster_handle():
    """The :class:`ClusterHandle` class, for modules that start their own cluster and wrap it
    (``cluster_handle(spec, address)``); test modules cannot import ``conftest`` by name."""
    return ClusterHandle


@pytest.fixture(scope="session")
def shared_clusters():
    """Spec (as sorted JSON) -> the :class:`ClusterHandle` that every module with
    ``TV_CLUSTER_SHARED = True`` and that spec uses; each is closed when the test run ends."""
    handles: dict = {}
    yield handles
    while handles:
        handles.popitem()[1].close()


@pytest.fixture(scope="session")
def shared_cluster_of(shared_clusters):
    """``shared_cluster_of(spec)``: the shared :class:`ClusterHandle` of ``spec`` (started on
    first use), for a module that needs a second spec beside its ``TV_CLUSTER``; the module
    must kill no worker, leave no state, and call ``close_sessions()`` when it is done."""
    def get(spec: dict) -> ClusterHandle:
        key = json.dumps(spec, sort_keys=True)
        if key not in shared_clusters:
            shared_clusters[key] = ClusterHandle(spec)
        return shared_clusters[key]
    return get


@pytest.fixture(scope="module")
def cluster3(shared_cluster_of):
    """The suite's shared ``{"ps": 1, "worker": 2}`` cluster (three devices in three worker
    processes), its sessions closed when the module ends."""
    handle = shared_cluster_of({"ps": 1, "worker": 2})
    yield handle
    handle.close_sessions()


@pytest.fixture(scope="module")
def tv_cluster(request, shared_cluster_of):
    spec = getattr(request.module, "TV_CLUSTER", DEFAULT_CLUSTER)
    if not getattr(request.module, "TV_CLUSTER_SHARED", False):
        handle = ClusterHandle(spec)
        yield handle
        handle.close()
        return
    handle = shared_cluster_of(spec)
    yield handle
    handle.close_sessions()  # left as found for the next module


@pytest.fixture
def cluster(tv_cluster):
    """The module's cluster, with this test's sessions closed when it ends."""
    yield tv_cluster
    tv_cluster.close_sessions()
