"""A session's close never hangs on the LocalCluster it started (seen in a full suite run:
after its workers were killed and restarted 20 times, Dask's ``Cluster.close()`` waited for
ever with every worker process already gone). The close is bounded
(``dask_plane.CLUSTER_CLOSE_S``) and says what it left; on the old code this test hangs until
pytest-timeout fails it."""
import asyncio
import logging

import pytest
from distributed.deploy.spec import SpecCluster

import tensorvm as tv
from tensorvm.runtime import dask_plane

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(120)
def test_a_cluster_that_never_closes_does_not_hang_the_session(monkeypatch, caplog):
    real = SpecCluster._close

    async def never(self):  # a close that waits for ever, as the one seen
        await asyncio.Event().wait()

    monkeypatch.setattr(dask_plane, "CLUSTER_CLOSE_S", 2.0)
    before = set(SpecCluster._instances)
    s = tv.Session(cluster={"worker": 1}, graph=tv.Graph(), verbose=False)
    started = set(SpecCluster._instances) - before
    try:
        with s.graph.as_default():
            c = tv.constant(2.0) * 3.0
        assert s.run(c) == 6.0
        monkeypatch.setattr(SpecCluster, "_close", never)
        caplog.set_level(logging.WARNING, logger="tensorvm")
        s.close()  # returns: the close is bounded
        assert "the local cluster did not close within 2s" in caplog.text
    finally:
        monkeypatch.setattr(SpecCluster, "_close", real)
        for lc in started:  # the cluster really goes, with its worker processes
            lc.close(timeout=60)
