"""A job's metric curves (the loss curve) as Bokeh charts, as Dask's own dashboard draws its
charts: each metric a line of its raw values and one smoothed as TensorBoard smooths (a
debiased exponential moving average, :func:`smooth`), a ``linear``/``log`` tab per chart (a
loss that falls from 7 to 4e-13 reads on the log axis), and one "smoothing" slider for all of
them.

The charts sit after the page's live part (which the page swaps every second; a Bokeh
document must not be swapped): their own script fetches the job's JSON every two seconds
while the job runs and replaces the charts' data. BokehJS comes from the scheduler itself
(:data:`STATIC_FILES` under ``<base>/static/``), so the page needs no internet.

>>> html = metric_charts({"id": "j1", "state": "done",
...                       "metrics": {"history": {"loss": [[1, 2.0], [2, 1.0]]}}}, "/tensorvm")
>>> 'id="curve-loss"' in html and "/tensorvm/static/bokeh.min.js" in html
True
>>> metric_charts({"id": "j1", "metrics": {"history": {}}}, "/tensorvm")
''
"""
from __future__ import annotations

import json
import os
from html import escape

SMOOTHING = 0.6  # the slider's first value (TensorBoard's default)
STATIC_FILES = ("bokeh.min.js", "bokeh-widgets.min.js")
"""The BokehJS bundles the charts need (the core and the widgets: tabs, slider), served by
:class:`tensorvm.scheduler_ext.http.BokehStatic` from the installed bokeh package."""

# TensorBoard's smoothing, in the browser (the same as smooth)
_SMOOTH_JS = """
function tvSmooth(ys, w){var out=[],last=0,deb=0;for(var i=0;i<ys.length;i++){
last=last*w+(1-w)*ys[i];deb=deb*w+(1-w);out.push(deb?last/deb:ys[i])}return out}
"""


def smooth(values: list, weight: float) -> list:
    """TensorBoard's scalar smoothing: an exponential moving average with weight ``weight``
    (0: none, towards 1: smoother), debiased so that the first points are not pulled to 0.
    The charts' slider runs the same in the browser (``_SMOOTH_JS``).

    >>> [round(v, 3) for v in smooth([1.0, 0.0, 0.0], 0.5)]
    [1.0, 0.333, 0.143]
    """
    out, last, debias = [], 0.0, 0.0
    for v in values:
        last = last * weight + (1.0 - weight) * float(v)
        debias = debias * weight + (1.0 - weight)
        out.append(last / debias if debias else float(v))
    return out


_UPDATE_JS = """
<script>
(function(){var url=%s,names=%s,running=%s;
function doc(){return window.Bokeh&&Bokeh.documents&&Bokeh.documents[0]}
function tick(){if(!running)return;fetch(url,{cache:"no-store"}).then(function(r){
return r.ok?r.json():null}).then(function(j){if(!j)return;var h=j.metrics.history||{};
for(var n in h){if(names.indexOf(n)<0){location.reload();return}}
running=j.state=="running";if(!doc())return;
var w=doc().get_model_by_name("smoothing").value;
for(n in h){var src=doc().get_model_by_name("src-"+n);var xs=h[n].map(function(p){return p[0]}),
ys=h[n].map(function(p){return p[1]});src.data={step:xs,value:ys,smooth:tvSmooth(ys,w)}}}).catch(function(){})}
setInterval(tick,2000)})();
</script>
"""


def bokeh_file(name: str) -> str | None:
    """The path of one of :data:`STATIC_FILES` in the installed bokeh, else None."""
    if name not in STATIC_FILES:
        return None
    import bokeh
    path = os.path.join(os.path.dirname(bokeh.__file__), "server", "static", "js", name)
    return path if os.path.isfile(path) else None


def _ordered(hist: dict) -> list:
    return sorted(hist.items(), key=lambda kv: (kv[0] != "loss", "loss" not in kv[0], kv[0]))


def metric_charts(j: dict, base: str) -> str:
    """The job's metric curves (``j["metrics"]["history"]``) as Bokeh charts with their
    scripts; ``""`` when the job has no metric yet (the live script reloads the page when
    one appears)."""
    hist = (j.get("metrics") or {}).get("history") or {}
    running = j.get("state") == "running"
    api = f"{base}/api/jobs/{j['id']}"
    if not hist:
        return _update_script(api, [], running) if running else ""
    from bokeh.embed import components
    from bokeh.models import ColumnDataSource, CustomJS, Slider, TabPanel, Tabs
    from bokeh.plotting import figure
    slider = Slider(start=0.0, end=0.99, step=0.01, value=SMOOTHING, title="smoothing",
                    name="smoothing", width=300)
    models, sources = {"smoothing": slider}, []
    for name, points in _ordered(hist):
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        src = ColumnDataSource({"step": xs, "value": ys, "smooth": smooth(ys, SMOOTHING)},
                               name=f"src-{name}")
        sources.append(src)
        panels = []
        for scale in ("linear", "log"):
            fig = figure(height=240, width=620, y_axis_type=scale, title=name,
                         x_axis_label="step", tools="pan,box_zoom,wheel_zoom,reset,hover",
                         tooltips=[("step", "@step"), (name, "@value"),
                                   ("smoothed", "@smooth")])
            fig.line("step", "value", source=src, color="#c0392b", alpha=0.3, line_width=1,
                     legend_label="raw")
            fig.line("step", "smooth", source=src, color="#c0392b", line_width=2,
                     legend_label="smoothed")
            fig.legend.location = "top_right"
            panels.append(TabPanel(child=fig, title=scale))
        models[name] = Tabs(tabs=panels)
    slider.js_on_change("value", CustomJS(args={"sources": sources}, code=_SMOOTH_JS + """
for (const s of sources){const d=Object.assign({}, s.data);
d.smooth=tvSmooth(Array.from(d.value), cb_obj.value);s.data=d}"""))
    script, divs = components(models)
    scripts = "".join(f'<script src="{escape(base)}/static/{f}"></script>'
                      for f in STATIC_FILES)
    charts = "".join(f'<div id="curve-{escape(_ident(n))}" class="curve">{divs[n]}</div>'
                     for n, _ in _ordered(hist))
    return (f"<h2>Metric curves</h2>{scripts}<div id='smoothing'>{divs['smoothing']}</div>"
            f"{charts}{script}<script>{_SMOOTH_JS}</script>"
            f"{_update_script(api, [n for n, _ in _ordered(hist)], running)}")


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "-" for c in name)


def _update_script(api: str, names: list, running: bool) -> str:
    js = json.dumps
    return _UPDATE_JS % (js(api).replace("<", "\\u003c"), js(names).replace("<", "\\u003c"),
                         js(running))
