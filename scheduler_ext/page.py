"""HTML of the tensorvm dashboard pages, rendered from the registry's plain data (pure
functions: a job dict in, a string out).

A page is rendered whole by the server (so it reads right without JavaScript, and a headless
browser's screenshot shows the state at the moment it asked), then a few lines of script
fetch the page's *fragment* every second and swap it in: one renderer, in Python.

>>> "wordcount" in jobs_table([{"id": "j1", "name": "wordcount", "user": "ann",
...     "state": "running", "elapsed": 1.5, "progress": {"done": 1, "total": 2,
...     "fraction": 0.5}, "metrics": {"step": None, "last": {}}}], "/tensorvm")
True
"""
from __future__ import annotations

from html import escape

_STYLE = """
body{font-family:Helvetica,Arial,sans-serif;margin:0;color:#222}
.nav{background:#1c1c1c;padding:8px 16px}.nav a{color:#fff;margin-right:16px;text-decoration:none}
main{padding:12px 20px}h1{font-size:20px;overflow-wrap:anywhere}.job-row td{white-space:nowrap}
.job-row td:first-child,.job-row td.muted{white-space:normal;overflow-wrap:anywhere;min-width:120px}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;font-size:13px}td,th{padding:4px 10px;border-bottom:1px solid #ddd;
text-align:left}.bar{display:inline-block;width:160px;height:12px;background:#eee;
vertical-align:middle;margin-right:6px}.bar>div{height:12px;background:#3d8c40}
.state-failed{color:#b00}.state-done{color:#3d8c40}.state-running{color:#1f5fa8}
.muted{color:#888}svg text{font-size:11px;font-family:Helvetica,Arial,sans-serif}
.lost{background:#fdecea;border:1px solid #b00;color:#b00;padding:6px 10px;margin:8px 0}
.erred{color:#b00;font-weight:bold}pre.error{white-space:pre-wrap;color:#b00;margin:0;
font-size:12px;max-width:1000px}.rate{color:#555}
"""

_REFRESH = """
<script>
(function(){var url=%s,n=0,seen=new Date();
function lost(why){var b=document.getElementById("lost");b.textContent=why+" since "+
seen.toTimeString().slice(0,8)+": below is the last state seen.";b.style.display="block"}
setInterval(function(){fetch(url,{cache:"no-store"})
.then(function(r){if(r.ok)return r.text();lost(r.status==404?"This job is no longer on "+
"the scheduler":"The scheduler answers "+r.status);return null})
.then(function(t){if(t!==null){var live=document.getElementById("live");live.innerHTML=t;
live.dataset.refreshes=++n;seen=new Date();document.getElementById("lost").style.display=
"none"}}).catch(function(){lost("No answer from the scheduler (it may have closed)")})},1000)
})();
</script>
"""


NAV_PAGES = ("status", "workers", "tasks", "system", "profile", "graph", "groups", "info")


def page(title: str, body: str, fragment_url: str, base: str,
         pages: tuple | list = NAV_PAGES, after: str = "") -> str:
    """A whole page: the Dask dashboard's navigation (its ``pages``), ``body`` inside
    ``#live``, refreshed
    from ``fragment_url`` every second; ``#lost`` says since when the scheduler has not
    answered (or no longer has the job), so a closed cluster's page does not look live.
    ``after`` follows ``#live`` and is not swapped (the Bokeh charts, which update their own
    data: :func:`metric_charts`)."""
    root = base.rsplit("/tensorvm", 1)[0]
    nav = "".join(f'<a href="{root}/{p}">{p.title()}</a>'
                  for p in pages)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><div class='nav'>{nav}"
            f'<a href="{base}"><b>tensorvm</b></a></div><main><div id="lost" class="lost" '
            f'style="display:none"></div><div id="live">{body}</div>{after}'
            f"</main>{_REFRESH % _js_str(fragment_url)}</body></html>")


def _js_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("<", "\\x3c") + '"'


def _bar(fraction: float) -> str:
    pct = max(0.0, min(1.0, float(fraction or 0.0))) * 100
    return f'<span class="bar"><div style="width:{pct:.1f}%"></div></span>'


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return escape(str(v))


def _training(m: dict) -> bool:
    """Whether the job reports steps towards a target (its progress is in steps)."""
    return m.get("step") is not None and bool(m.get("total_steps"))


def _progress(j: dict) -> str:
    """The progress cell: a bar and a label that say the same, in the job's terms: steps of
    the target for training (and whether it stopped before the target), else tasks."""
    p, m = j["progress"], j["metrics"]
    if _training(m):
        step, total = m["step"], m["total_steps"]
        text = (f'{_bar(min(1.0, step / total))}<span class="progress-value">{step}/{total}'
                "</span> steps")
        if j.get("state") == "done" and step < total:
            text += ' <span class="muted">(stopped before the target step)</span>'
    elif p.get("map_reduce"):  # as the CLI's display: splits and reducers
        mr = p["map_reduce"]
        (sd, st), (md, mt), (rd, rt) = mr["splits"], mr["map_tasks"], mr["reducers"]
        text = (f'{_bar((sd + rd * st / rt) / (2 * st))}<span class="progress-value">'
                f"{sd}/{st}</span> splits ({md}/{mt} map tasks) · "
                f'<span class="progress-value">{rd}/{rt}</span> reducers')
    else:
        finished = p["done"] + p.get("ended", 0) + p.get("erred", 0)
        frac = finished / p["total"] if p["total"] else p.get("fraction", 0.0)
        text = (f'{_bar(frac)}<span class="progress-value">{p["done"]}/{p["total"]}</span>'
                " tasks")
    return text + _erred(p.get("erred"))


def _metric(m: dict) -> str:
    """The job's latest metric: ``loss`` first, then another ``...loss``, then any."""
    last = m.get("last") or {}
    if not last:
        return ""
    name = min(last, key=lambda k: (k != "loss", "loss" not in k, k))
    return f"{escape(name)} {_fmt(last[name])}"


def _elapsed(j: dict) -> str:
    """Elapsed time from the job's submission; the time before it started (a cluster's start,
    or connecting to one) shown apart."""
    text = f'{j["elapsed"]:.1f} s'
    setup = j.get("setup_s") or 0.0
    if setup >= 0.05:
        what = "cluster start" if j.get("cluster_started_for_job") else "start"
        text += (f' <span class="muted">({what} {setup:.1f} s + run '
                 f'{j.get("run_s", j["elapsed"] - setup):.1f} s)</span>')
    return text


def _steps(p: dict, m: dict) -> str:
    """The steps cell: the job's reported step (of its total), else the runs the registry
    counted (a plain session's training loop); then the rate and the time of one."""
    runs = (p.get("runs") or {}).get("done") or 0
    if _training(m):  # the progress cell has the steps: the rate only
        rate = m.get("steps_per_s")
        return f'<span class="rate">{rate:.3g} steps/s</span>' if rate else ""
    if m.get("step") is not None:
        text = f"step {m['step']}" + (f"/{m['total_steps']}" if m.get("total_steps") else "")
        rate, unit = m.get("steps_per_s"), "step"
    elif runs:
        text = f"{runs} run" + ("s" if runs != 1 else "")
        rate, unit = m.get("runs_per_s"), "run"
    else:
        return ""
    if rate:
        text += (f' <span class="rate">{rate:.3g} {unit}s/s, '
                 f"{_duration(1.0 / rate)}/{unit}</span>")
    return text


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _erred(n) -> str:
    return f' <span class="erred">{n} failed</span>' if n else ""


def job_row(j: dict, base: str) -> str:
    """One ``<tr>`` for a job (the list page and the top of a job's page)."""
    p, m = j["progress"], j["metrics"]
    jid = escape(j["id"])
    return (f'<tr class="job-row" data-job="{jid}"><td><a href="{base}/job/{jid}">'
            f'{escape(j["name"])}</a></td><td>{_fmt(j.get("user"))}</td>'
            f'<td class="state-{escape(j["state"])}">{escape(j["state"])}</td>'
            f"<td>{_progress(j)}</td><td>{_steps(p, m)}</td><td>{_metric(m)}</td>"
            f'<td>{_elapsed(j)}</td><td class="muted">{jid}</td></tr>')


_HEAD = ("<tr><th>job</th><th>user</th><th>state</th><th>progress</th><th>steps</th>"
         "<th>metric</th><th>elapsed</th><th>id</th></tr>")


def jobs_table(jobs: list[dict], base: str) -> str:
    """The list page's live part."""
    if not jobs:
        return "<h1>tensorvm jobs</h1><p class='muted'>No tensorvm job has run here yet.</p>"
    rows = "".join(job_row(j, base) for j in jobs)
    return f"<h1>tensorvm jobs</h1><table id='jobs'>{_HEAD}{rows}</table>"


def job_detail(j: dict, base: str) -> str:
    """A job page's live part: its row, graph, devices, counters and metric curves."""
    out = [f"<h1>{escape(j['name'])} <span class='muted'>{escape(j['id'])}</span></h1>",
           f"<table id='job'>{_HEAD}{job_row(j, base)}</table>"]
    if j.get("reason"):
        out.append(f"<p class='state-failed'>{escape(str(j['reason']))}</p>")
    if j.get("errors"):
        out.append(errors_table(j["errors"]))
    if j.get("output"):
        out.append(f"<p>output: <code>{escape(str(j['output']))}</code></p>")
    if j.get("args"):
        out.append(args_table(j["args"]))
    out += ["<h2>Partitioned graph</h2>", graph_svg(j), "<h2>Devices</h2>", devices_table(j)]
    out.append(ran_again(j))
    if j.get("counters"):
        rows = "".join(f"<tr><td>{escape(str(k))}</td><td>{_fmt(v)}</td></tr>"
                       for k, v in sorted(j["counters"].items()))
        out.append(f"<h2>Counters</h2><table id='counters'>{rows}</table>")
    hist = j["metrics"].get("history") or {}
    if hist:
        out.append("<h2>Metrics</h2>")
        rate = j["metrics"].get("steps_per_s")
        if rate is not None:
            out.append(f"<p>{rate:.3g} steps/s</p>")
        # the curves themselves are Bokeh charts after the live part (metric_charts)
    return "".join(out)


def ran_again(j: dict) -> str:
    """The tasks the job ran again (issue 23): those the scheduler moved off a straggler
    (``map13: worker-1 → worker-0``) and those re-run because a worker left (``worker-1 left:
    map7 ran again``), the latest first, each at its time since the job started; nothing
    when there were none.

    >>> html = ran_again({"started": 100.0, "moves": 1, "reruns": 2,
    ...     "moved": [{"task": "map13", "from": "tcp://b", "from_name": "worker-1",
    ...                "to": "tcp://a", "to_name": "worker-0", "time": 101.5}],
    ...     "reran": [{"worker": "tcp://b", "worker_name": "w<1>", "time": 103.0,
    ...                "tasks": ["map7", "reduce0"]}]})
    >>> "map13: worker-1 → worker-0" in html, "w&lt;1&gt; left: map7, reduce0 ran again" in html
    (True, True)
    """
    out = []
    started = j.get("started")
    moved, reran = j.get("moved") or [], j.get("reran") or []
    if moved:
        items = "".join(f"<li>{escape(str(m['task']))}: "
                        f"{escape(_worker(m.get('from_name'), m.get('from')))} → "
                        f"{escape(_worker(m.get('to_name'), m.get('to')))}"
                        f"{_since(m.get('time'), started)}</li>" for m in reversed(moved))
        out.append(f"<h2>Moved off stragglers</h2>{_latest(len(moved), j.get('moves'))}"
                   f"<ul id='moves'>{items}</ul>")
    if reran:
        items = "".join(f"<li>{escape(_worker(r.get('worker_name'), r.get('worker')))}"
                        f" left: {escape(', '.join(str(t) for t in r['tasks']))} ran again"
                        f"{_since(r.get('time'), started)}</li>" for r in reversed(reran))
        n = sum(len(r["tasks"]) for r in reran)
        out.append(f"<h2>Ran again after a worker left</h2>{_latest(n, j.get('reruns'))}"
                   f"<ul id='reruns'>{items}</ul>")
    return "".join(out)


def _worker(name, address) -> str:
    return str(name or address or "?")


def _since(t, started) -> str:
    if not isinstance(t, (int, float)) or not isinstance(started, (int, float)):
        return ""
    return f" <span class='muted'>at {max(0.0, t - started):.1f} s</span>"


def _latest(shown: int, total) -> str:
    """Says so when the registry kept only the latest of them."""
    if isinstance(total, int) and total > shown:
        return f"<p class='muted'>the latest {shown} of {total}</p>"
    return ""


def args_table(args: dict) -> str:
    """The job's arguments as the registry keeps them (secret-named ones already redacted,
    :func:`tensorvm.scheduler_ext.redaction.redact_args`).

    >>> html = args_table({"input": "a<b", "argv": ["--lr", "0.1"], "api_token": "***"})
    >>> [t in html for t in ("<td>input</td>", "a&lt;b", "--lr 0.1", "***")]
    [True, True, True, True]
    """
    rows = "".join(f"<tr><td>{escape(str(k))}</td><td><code>{escape(_arg_text(v))}</code>"
                   "</td></tr>" for k, v in sorted(args.items(), key=lambda kv: str(kv[0])))
    return f"<h2>Arguments</h2><table id='args'>{rows}</table>"


def _arg_text(v) -> str:
    if isinstance(v, (list, tuple)):
        return " ".join(_arg_text(x) for x in v)
    return str(v)


def errors_table(errors: list[dict]) -> str:
    """The latest failed tasks: where (device, stage) and the error, op name included."""
    rows = "".join(f"<tr><td>{escape(str(e['device']))}</td><td>s{e['stage']}</td>"
                   f"<td><pre class='error'>{escape(str(e['error']))}</pre></td></tr>"
                   for e in reversed(errors))
    return ("<h2 class='state-failed'>Errors</h2><table id='errors'><tr><th>device</th>"
            f"<th>stage</th><th>error (latest first)</th></tr>{rows}</table>")


def devices_table(j: dict) -> str:
    """One row per device: its tasks with a bar of its share of the work (against the
    busiest device: in training every step completes, so done/total says nothing, while the
    share shows where the work goes), what is still pending, failed and ended."""
    rows = []
    busiest = max((d["total"] for d in j["devices"]), default=0) or 1
    for d in j["devices"]:
        ended = d.get("ended", 0)
        pending = d["total"] - d["done"] - d.get("erred", 0) - ended
        stages = " ".join(f"s{s['stage']}: {s['done']}/{s['total']}{_erred(s.get('erred'))}"
                          for s in d["stages"])
        worker = d.get("worker_name") or d.get("worker") or ""
        gone = "" if d.get("worker_alive") in (None, True) else " <b>(gone)</b>"
        failed = d.get("erred") or ""
        notes = (f" <span class='muted'>{pending} pending</span>" if pending > 0 else "") + \
            (f" <span class='muted' title='ended at the end of their input or of training, "
             f"not failed'>{ended} ended</span>" if ended else "")
        rows.append(f"<tr><td>{escape(d['device'])}</td><td>{escape(str(worker))}{gone}</td>"
                    f"<td>{_bar(d['total'] / busiest)}{d['done']}/{d['total']}{notes}</td>"
                    f"<td class='state-failed'>{failed}</td><td>{stages}</td></tr>")
    return ("<table id='devices'><tr><th>device</th><th>worker</th>"
            "<th title='the bar: tasks against the busiest device'>tasks (share of work)</th>"
            f"<th>failed</th><th>per stage</th></tr>{''.join(rows)}</table>")


def graph_svg(j: dict) -> str:
    """Devices as boxes (one column each), their stages as nodes filled by progress, and
    the dependencies: Send/Recv edges (across devices) solid blue, local ones grey."""
    nodes = j["graph"]["nodes"]
    if not nodes:
        return "<p class='muted'>No task submitted yet.</p>"
    devices = sorted({n["device"] for n in nodes})
    stages = sorted({n["stage"] for n in nodes})
    col = {d: i for i, d in enumerate(devices)}
    row = {s: i for i, s in enumerate(stages)}
    W, H, NW, NH = 190, 70, 130, 34
    pos = {n["id"]: (20 + col[n["device"]] * W + (W - 20 - NW) / 2,
                     50 + row[n["stage"]] * H) for n in nodes}
    prog = {f"{d['device']}/s{s['stage']}": s for d in j.get("devices", []) for s in d["stages"]}
    out = [f'<svg id="graph" xmlns="http://www.w3.org/2000/svg" width="{20 + len(devices) * W}"'
           f' height="{60 + len(stages) * H}"><defs><marker id="arrow" viewBox="0 0 10 10" '
           'refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto">'
           '<path d="M0,0L10,5L0,10z" fill="#1f5fa8"/></marker></defs>']
    for d in devices:
        x = 20 + col[d] * W
        out.append(f'<rect class="device" x="{x}" y="8" width="{W - 20}" '
                   f'height="{30 + len(stages) * H}" rx="6" fill="#f4f6fa" stroke="#7a8aa6"/>'
                   f'<text x="{x + 8}" y="26" font-weight="bold">{escape(d)}</text>')
    for e in j["graph"]["edges"]:
        if e["src"] not in pos or e["dst"] not in pos:
            continue
        (x1, y1), (x2, y2) = pos[e["src"]], pos[e["dst"]]
        style = ('stroke="#1f5fa8" stroke-width="2" marker-end="url(#arrow)"' if e["send"]
                 else 'stroke="#aaa" stroke-dasharray="4,3"')
        label = "Send/Recv" if e["send"] else "local"
        out.append(f'<line class="edge {"send" if e["send"] else "local"}" x1="{x1 + NW / 2}" '
                   f'y1="{y1 + NH}" x2="{x2 + NW / 2}" y2="{y2}" {style}>'
                   f"<title>{label}: {escape(e['src'])} -&gt; {escape(e['dst'])}</title></line>")
    for n in nodes:
        x, y = pos[n["id"]]
        s = prog.get(n["id"], {"done": 0, "total": 0})
        finished = s["done"] + s.get("ended", 0)  # ended at a loop's end: not pending
        frac = finished / s["total"] if s["total"] else 0.0
        look = ('class="stage erred" fill="#fdecea" stroke="#b00" stroke-width="2"'
                if s.get("erred") else 'class="stage" fill="#fff" stroke="#555"')
        out.append(f'<rect {look} x="{x}" y="{y}" width="{NW}" height="{NH}" rx="4"/>'
                   f'<rect x="{x}" y="{y + NH - 6}" '
                   f'width="{NW * frac:.1f}" height="6" fill="#3d8c40"/>'
                   f'<text x="{x + 8}" y="{y + 18}">{escape(_label(n, s))}</text>')
    out.append("</svg>")
    return "".join(out)


def _label(node: dict, progress: dict) -> str:
    if node.get("label"):
        return node["label"]
    return (f"stage {node['stage']}  {progress['done'] + progress.get('ended', 0)}"
            f"/{progress['total']}")
