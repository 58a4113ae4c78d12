"""Ctrl-C typed on a real terminal (a pty) while `tensorvm run` trains on its own LocalCluster.

A terminal's Ctrl-C is SIGINT to the whole foreground process group, the cluster's worker
processes included: each died printing its own KeyboardInterrupt/CancelledError traceback
(~66 lines for two workers, issue 25). Workers ignore SIGINT now (``tensorvm.runtime.cluster.worker_signals``);
the CLI alone handles it: one line, exit 130, and no process of the cluster left behind."""
from __future__ import annotations

import os
import re
import select
import shutil
import sys
import time

import psutil
import pytest

TVM = shutil.which("tensorvm") or os.path.join(os.path.dirname(sys.executable), "tensorvm")
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(sys.platform == "win32", reason="pty")]


def _read_until(fd, buf: bytearray, pattern: bytes | None, limit_s: float) -> bool:
    """Read the pty into ``buf`` until ``pattern`` shows (True), EOF or ``limit_s`` (False)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if pattern is not None and pattern in buf:
            return True
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not chunk:
            return False
        buf += chunk
    return False


def test_ctrl_c_on_a_terminal_exits_130_in_one_line_and_stops_the_cluster():
    import pty
    argv = [TVM, "run", "ridge", "--cluster", "ps=1,worker=1", "--steps", "1000000",
            "--report-every", "10"]
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session of its own with the pty as its terminal
        os.environ["COLUMNS"] = "120"
        os.execv(argv[0], argv)
    buf = bytearray()
    try:
        assert _read_until(fd, buf, b"loss", 240), buf.decode(errors="replace")[-2000:]
        family = psutil.Process(pid).children(recursive=True)
        assert len(family) >= 2, family  # the cluster's worker processes (and their helpers)
        before = len(buf)
        os.write(fd, b"\x03")  # Ctrl-C, as typed: the line discipline signals the group
        _read_until(fd, buf, None, 120)
        _, status = os.waitpid(pid, 0)
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.close(fd)
    after = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf[before:].decode(errors="replace"))
    assert os.waitstatus_to_exitcode(status) == 130, after
    assert "Traceback" not in after and "KeyboardInterrupt" not in after, after
    assert after.strip().splitlines()[-1].strip() == "tensorvm: interrupted", after
    _, alive = psutil.wait_procs(family, timeout=60)
    assert alive == [], alive
