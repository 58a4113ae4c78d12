"""Headless Chromium (Debian's ``chromium``, which ``make test`` installs where it may) for the
page tests: the DOM after load, or a screenshot. Tests skip, saying why, when it is missing."""
from __future__ import annotations

import shutil
import subprocess
import tempfile

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = "headless Chromium is not installed (Debian's chromium: make test installs it as root)"


def chromium(url: str, *, screenshot: str | None = None, virtual_ms: int = 0,
             size: tuple[int, int] = (1200, 900)) -> str:
    """The DOM of ``url`` after load (or a ``size`` screenshot to ``screenshot``); with
    ``virtual_ms`` the page's timers run that long (virtual time) first."""
    profile = tempfile.mkdtemp()
    try:
        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                f"--window-size={size[0]},{size[1]}", "--hide-scrollbars"]
        args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
        args += [f"--virtual-time-budget={virtual_ms}"] if virtual_ms else []
        out = subprocess.run(args + [url], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)
