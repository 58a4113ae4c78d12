"""``tensorvm history [URL]`` and ``tensorvm ui [URL] [--port N]``: the jobs whose event logs
are under a history URL (:mod:`tensorvm.scheduler_ext.history`), listed, or served as the
dashboard's job pages with no cluster up (Spark's History Server).

``URL`` defaults to where jobs write their logs: the Dask config ``tensorvm.history.url``,
else ``$TENSORVM_HISTORY``, else ``~/.local/share/tensorvm/history``.

::

    $ tensorvm history
    ID                   NAME       STATE  STARTED              DURATION
    wordcount-54a461fd   wordcount  done   2026-11-28 02:03:31  11.7 s
    $ tensorvm ui --port 18080
    http://127.0.0.1:18080/tensorvm
"""
from __future__ import annotations

import json
import sys
import time

import click

EXIT_OK, EXIT_USAGE = 0, 2


def _url(url: str | None) -> tuple[str, bool]:
    """The URL to read and whether the user named it."""
    from tensorvm.scheduler_ext.history import history_url
    if url:
        return url, True
    found = history_url()
    if found is None:
        raise click.UsageError("job history is off (tensorvm.history.url / TENSORVM_HISTORY "
                               "say 'off'): name a URL")
    return found, False


def _reader(url: str, named: bool):
    """A reader of ``url``, or None when nothing was logged there yet (a named URL that
    does not exist is a usage error)."""
    from tensorvm.scheduler_ext.history import HistoryReader
    try:
        reader = HistoryReader(url)
        exists = reader.fs.exists(reader.folder)
    except (ValueError, ImportError, OSError) as exc:
        raise click.UsageError(f"cannot read the history at {url}: {exc}") from exc
    if not exists:
        if named:
            raise click.UsageError(f"no job history at {url} (no such folder)")
        return None
    return reader


def _when(t) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


@click.command("history")
@click.argument("url", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as one JSON document.")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="Show at most this many jobs (the newest).")
def history(url, as_json, limit):
    """List the jobs logged under URL (the default history folder if left out): id, name,
    state, start time and duration, newest first."""
    url, named = _url(url)
    reader = _reader(url, named)
    rows = (reader.jobs() if reader is not None else [])[:limit]
    if as_json:
        click.echo(json.dumps({"url": url, "jobs": [
            {k: r.get(k) for k in ("id", "name", "state", "kind", "user", "started",
                                   "ended", "elapsed", "reason", "log")} for r in rows]}))
        return EXIT_OK
    if not rows:
        click.echo(f"no job logged under {url} yet")
        return EXIT_OK
    table = [("ID", "NAME", "STATE", "STARTED", "DURATION")] + [
        (str(r["id"]), str(r.get("name") or ""), str(r.get("state") or ""),
         _when(r.get("started")), f"{float(r.get('elapsed') or 0):.1f} s") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[4])
    return EXIT_OK


@click.command("ui")
@click.argument("url", required=False)
@click.option("--port", type=click.IntRange(min=0, max=65535), default=18080,
              show_default=True, help="TCP port to serve on (0: any free port).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (the pages show job arguments: keep it local).")
def ui(url, port, host):
    """Serve the job pages (timeline, trace.json, counters, curves) of the jobs logged under
    URL with no cluster up, until Ctrl-C. Prints the address once it listens."""
    url, named = _url(url)
    _reader(url, named)  # a named URL that is not there: exit 2 before listening
    from tensorvm.scheduler_ext.history_ui import serve

    def ready(address: str) -> None:
        click.echo(address)
        click.echo(f"serving the job history at {url} (Ctrl-C to stop)", err=True)
        sys.stdout.flush()
    try:
        serve(url, port=port, host=host, ready=ready)
    except OSError as exc:  # the port is taken, the host is not ours
        raise click.UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    except KeyboardInterrupt:  # the normal way to stop a server
        return EXIT_OK
    return EXIT_OK
