"""``tv.train.Server``: TF 1.x's in-process server, as a Dask worker named after its task.

A TF 1.x distributed script starts one server per task and points sessions at it::

    cluster = tf.train.ClusterSpec({"ps": ["host0:2222"], "worker": ["host1:2222"]})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    else:
        with tf.Session(server.target) as sess: ...

In tensorvm a server is a ``distributed.Worker`` named ``<job>-<task>`` (the name the session
maps the task's device to), running on an event loop of its own in a background thread of the
program's process. It joins the Dask scheduler that the cluster agrees on:

* ``scheduler=`` (an address), else ``TENSORVM_SCHEDULER`` in the environment: an existing
  scheduler (``dask scheduler``, a deployment's);
* else the first task of the ClusterSpec's first job hosts it, at that task's own host:port
  (its worker then listens on a free port); every other task's worker listens at its own
  host:port and waits for the scheduler to come up, as TF's tasks wait for each other.

``server.target`` is ``grpc://host:port`` of the task, as TF's; ``tv.Session(server.target)``
(in this process) connects to the scheduler, maps the cluster's tasks by worker name, waits for
the tasks its ``ConfigProto.device_filters`` let it see, and places unplaced ops on this task.
Everything listens on the addresses the ClusterSpec gives (127.0.0.1 in the tests); pass
``security=distributed.Security(...)`` for TLS between hosts.

>>> server = Server.create_local_server()
>>> import tensorvm as tv
>>> with tv.Session(server.target, verbose=False) as sess:
...     float(sess.run(tv.constant(2.0) * 3.0))
6.0
>>> server.stop()
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

from ..runtime.cluster.spec import (SCHEDULER_ENV, ClusterSpec, is_tf_address, register_server,
                                    unregister_server)
from ..framework.errors import InvalidArgumentError, UnavailableError

_log = logging.getLogger("tensorvm")

__all__ = ["Server"]


def _split(entry: str) -> tuple[str, int]:
    host, _, port = entry.rpartition(":")
    return host.strip("[]"), int(port)


class Server:
    """One task of a TF cluster: a Dask worker named ``<job>-<task>`` (and, for the first task
    of the first job, the cluster's scheduler), started on construction unless
    ``start=False``.

    ``server_or_cluster_def`` is a ClusterSpec (or its dict) of TF host:port lists;
    ``job_name``/``task_index`` say which task this process is (a one-job, one-task cluster
    needs neither). ``protocol`` is accepted ("grpc" is what TF scripts pass) and ignored;
    ``config`` is a ``tv.ConfigProto`` (its ``inter_op_parallelism_threads`` > 0 sets the
    worker's threads, else 2). ``startup_timeout`` bounds the wait for the scheduler.
    """

    def __init__(self, server_or_cluster_def, job_name: str | None = None,
                 task_index: int | None = None, protocol: str | None = None, config=None,
                 start: bool = True, *, scheduler: str | None = None, security=None,
                 startup_timeout: float = 300.0):
        spec = ClusterSpec(server_or_cluster_def)
        if job_name is None:
            if len(spec.jobs) != 1:
                raise InvalidArgumentError(
                    f"tv.train.Server: job_name is needed for a cluster of jobs {spec.jobs}")
            job_name = spec.jobs[0]
        if job_name not in spec.jobs:
            raise InvalidArgumentError(f"tv.train.Server: job {job_name!r} is not in {spec}")
        if task_index is None:
            if spec.num_tasks(job_name) != 1:
                raise InvalidArgumentError(
                    f"tv.train.Server: task_index is needed: job {job_name!r} has "
                    f"{spec.num_tasks(job_name)} tasks")
            task_index = spec.task_indices(job_name)[0]
        entry = spec.task_address(job_name, int(task_index))
        if not is_tf_address(entry):
            raise InvalidArgumentError(
                f"tv.train.Server: task /job:{job_name}/task:{task_index} needs a host:port "
                f"address in the ClusterSpec, got {entry!r}")
        self.job_name, self.task_index = job_name, int(task_index)
        self._spec = spec
        self._entry = entry
        self._explicit_scheduler = scheduler
        self.scheduler_address = scheduler if scheduler else spec.scheduler_address()
        if "://" not in self.scheduler_address:
            self.scheduler_address = "tcp://" + self.scheduler_address
        self._hosts_scheduler = (scheduler is None and not os.environ.get(SCHEDULER_ENV)
                                 and spec.scheduler_task() == (job_name, self.task_index))
        threads = getattr(config, "inter_op_parallelism_threads", 0) or 2
        self._nthreads = int(threads)
        self._security = security
        self._timeout = float(startup_timeout)
        self._thread: threading.Thread | None = None
        self._loop = None
        self._stop_event = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._scheduler = None
        self._worker = None
        self.target = f"grpc://{entry}"
        if start:
            self.start()

    # ---- TF's API -------------------------------------------------------------------------
    @property
    def server_def(self) -> dict:
        """TF's ServerDef, as plain data."""
        return {"cluster": self._spec.as_cluster_def(), "job_name": self.job_name,
                "task_index": self.task_index, "protocol": "grpc"}

    @property
    def cluster_spec(self) -> ClusterSpec:
        return self._spec

    @property
    def worker_address(self) -> str | None:
        """The Dask address of this task's worker (once started)."""
        return None if self._worker is None else self._worker.address

    def start(self) -> None:
        """Start the worker (and the scheduler, on the first task); returns once the worker
        has joined the scheduler. Starting twice does nothing."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"tensorvm-server-{self.job_name}-{self.task_index}")
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            err, self._error = self._error, None
            self._thread.join()
            self._thread = None
            raise err
        register_server(self.target, self)

    def join(self) -> None:
        """Block until the server stops (TF: forever, for a parameter server)."""
        if self._thread is None:
            return
        while self._thread.is_alive():
            self._thread.join(0.5)  # wakes so that Ctrl-C is seen

    def stop(self) -> None:
        """Stop the worker (and the scheduler it hosts). Not in TF 1.x's API: for tests and
        programs that end a server before their process ends."""
        unregister_server(self.target)
        if self._thread is None:
            return
        if self._loop is not None and self._stop_event is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
        self._thread.join(30)
        self._thread = None

    @staticmethod
    def create_local_server(config=None, start: bool = True) -> Server:
        """A one-task cluster on a free port of 127.0.0.1 (TF's ``create_local_server``)."""
        return Server({"localhost": ["127.0.0.1:0"]}, "localhost", 0, config=config,
                      start=start)

    def __repr__(self):
        return (f"<tv.train.Server /job:{self.job_name}/task:{self.task_index} "
                f"{self.target} scheduler={self.scheduler_address}>")

    # ---- the worker's event loop ----------------------------------------------------------
    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # noqa: BLE001 - handed to the thread that started us
            if not self._started.is_set():
                self._error = e
                self._started.set()
            else:
                _log.error("tensorvm: server %s stopped: %r", self.target, e)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        host, port = _split(self._entry)
        try:
            if self._hosts_scheduler:
                await self._start_scheduler(host, port)
                port = 0
            await self._start_worker(host, port)
        except BaseException:
            if self._scheduler is not None:
                await self._scheduler.close()
            raise
        self._started.set()
        try:
            await self._stop_event.wait()
        finally:
            await self._worker.close(timeout=10)
            if self._scheduler is not None:
                await self._scheduler.close()

    async def _start_scheduler(self, host: str, port: int) -> None:
        from distributed import Scheduler
        tls = self._security is not None and getattr(self._security, "require_encryption", 0)
        self._scheduler = await Scheduler(host=host, port=port, dashboard=False,
                                          dashboard_address=f"{host}:0",
                                          protocol="tls://" if tls else "tcp://",
                                          security=self._security)
        self.scheduler_address = self._scheduler.address
        if port == 0:  # create_local_server: the real port becomes the task's address
            _, real = _split(self._scheduler.address.split("://", 1)[1])
            self._entry = f"{host}:{real}"
            self._spec = ClusterSpec({self.job_name: {self.task_index: self._entry}})
            self.target = f"grpc://{self._entry}"

    async def _start_worker(self, host: str, port: int) -> None:
        """Join the scheduler, retrying until it is up (it may be another process's, not
        started yet) or ``startup_timeout`` passes."""
        from distributed import Worker
        name = f"{self.job_name}-{self.task_index}"
        deadline = time.monotonic() + self._timeout
        delay = 0.1
        while True:
            worker = Worker(self.scheduler_address, name=name, nthreads=self._nthreads,
                            host=host, port=port, dashboard=False, security=self._security,
                            silence_logs=40)
            try:
                self._worker = await asyncio.wait_for(
                    worker.start(), timeout=max(1.0, min(10.0, deadline - time.monotonic())))
                return
            except (OSError, asyncio.TimeoutError) as e:
                await worker.close(timeout=5)
                if time.monotonic() > deadline:
                    raise UnavailableError(
                        f"tv.train.Server /job:{self.job_name}/task:{self.task_index}: no Dask "
                        f"scheduler at {self.scheduler_address} after {self._timeout:.0f} s "
                        f"({e!r}); it is started by the cluster's first task, or given by "
                        "TENSORVM_SCHEDULER") from e
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
