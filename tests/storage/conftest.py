"""Fixtures for the storage conformance suite: one ``store`` per filesystem.

``store`` is parametrised over ``file://`` (a tmp_path), ``memory://`` (a unique root, removed
afterwards) and ``s3://`` (s3fs against moto's S3 server, started once per session on
127.0.0.1 with a free port). Tests take URLs from ``store.url(...)`` and pass
``storage_options=store.options`` to every storage call.
"""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass, field

import fsspec
import pytest

BUCKET = "tvm-storage-tests"


@dataclass
class Store:
    """A test root on one filesystem: ``url(*parts)`` builds URLs under it."""

    kind: str
    root: str
    options: dict = field(default_factory=dict)

    def url(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        return fsspec.core.url_to_fs(self.root, **self.options)[0]

    def path(self, *parts: str) -> str:
        return fsspec.core.url_to_fs(self.url(*parts), **self.options)[1]

    def pipe(self, *parts_then_data) -> None:
        """Write bytes to ``url(*parts)``, creating parent folders."""
        *parts, data = parts_then_data
        path = self.path(*parts)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe(path, data)

    def open_write(self, *parts: str):
        """``open(url(*parts), "wb")``, creating parent folders."""
        path = self.path(*parts)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        return self.fs.open(path, "wb")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1 with dummy credentials; yields storage_options."""
    moto_server = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    port = _free_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        endpoint = f"http://127.0.0.1:{port}"
        options = {"key": "testing", "secret": "testing",
                   "client_kwargs": {"endpoint_url": endpoint}}
        fs = fsspec.filesystem("s3", **options)
        fs.mkdir(BUCKET)
        try:
            yield options
        finally:
            server.stop()


@pytest.fixture(params=["file", "memory", "s3"])
def store(request, tmp_path):
    """A fresh, empty root on each filesystem of the conformance suite."""
    if request.param == "file":
        yield Store("file", f"file://{tmp_path}")
    elif request.param == "memory":
        root = f"memory://tvmtest-{uuid.uuid4().hex}"
        yield Store("memory", root)
        fs = fsspec.filesystem("memory")
        if fs.exists(root[len("memory://"):]):
            fs.rm(root[len("memory://"):], recursive=True)
    else:
        options = request.getfixturevalue("s3_server")
        yield Store("s3", f"s3://{BUCKET}/{uuid.uuid4().hex}", options)


@pytest.fixture
def mem_root():
    """A unique ``memory://`` root, removed afterwards (for memory-only tests)."""
    root = f"memory://tvmtest-{uuid.uuid4().hex}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root[len("memory://"):]):
        fs.rm(root[len("memory://"):], recursive=True)

