"""``tensorvm plan``: the partitioned plans a job runs, captured by running it in process, and
their drawing (the dashboard's graph: devices as boxes, stages inside, Send/Recv edges)."""
from __future__ import annotations


def capture_plans(spec, kwargs: dict) -> list:
    """Run ``spec``'s job on an in-process session and return the distinct plans of its
    steps, in first-run order."""
    import tensorvm as tv

    from .runner import JobRun
    plans: dict[str, object] = {}
    with JobRun(spec, in_process=True) as job:
        sess = job.session
        real_run = sess.run

        def run(fetches, feed_dict=None, options=None, run_metadata=None, steps=1):
            p = sess.plan(fetches, feed_dict)
            plans.setdefault(str(p), p)
            return real_run(fetches, feed_dict, options, run_metadata, steps)

        sess.run = run  # this session only: the plan of every step the job runs
        with tv.job.reporting(lambda m: None):
            job.call(kwargs)
    return list(plans.values())


def plan_graph(plan) -> dict:
    """A plan as the registry's job dict (``graph`` and ``devices``) for the page's drawing.

    >>> import tensorvm as tv
    >>> g = tv.Graph()
    >>> with g.as_default():
    ...     with tv.device("/job:worker/task:0"):
    ...         x = tv.placeholder(tv.float32, [2])
    ...         a = x * 3.0
    ...     with tv.device("/job:ps/task:0"):
    ...         b = a + 1.0
    >>> with tv.Session(graph=g) as s:
    ...     [e["send"] for e in plan_graph(s.plan(b, {x: [1, 2]}))["graph"]["edges"]]
    [True]
    """
    from tensorvm.scheduler_ext.task_keys import parse_task_name
    from tensorvm.vm.program import Recv, Result
    node = {}
    for t in plan.tasks:
        parsed = parse_task_name(t.name)
        node[t.name] = (parsed[1] if parsed else t.device, t.stage)
    sends = {s.name: s for s in plan.sends}
    edges: dict = {}  # (src, dst) node -> whether a Send/Recv pair carries it
    for t in plan.tasks:
        for a in t.args:
            src = a.task if isinstance(a, Result) else \
                sends[a.send].task if isinstance(a, Recv) else None
            if src is not None and node[src] != node[t.name]:
                key = (node[src], node[t.name])
                # a floating job's map -> reduce shuffle is drawn within one device row
                # (parse_task_name groups a job's floating tasks), but it is still a send
                edges[key] = edges.get(key, False) or isinstance(a, Recv) or \
                    node[src][0] != node[t.name][0]
    ids = {k: f"{d}/s{s}" for k, (d, s) in node.items()}
    devices: dict[str, dict] = {}
    for d, s in node.values():
        devices.setdefault(d, {"device": d, "stages": []})["stages"].append(
            {"stage": s, "done": 0, "total": 0, "erred": 0})
    ops = {t.name: len(t.ops) for t in plan.tasks}
    return {"graph": {"nodes": [{"id": ids[k], "device": d, "stage": s,
                                 "label": f"stage {s}: {ops[k]} ops"}
                                for k, (d, s) in sorted(node.items(), key=lambda kv: kv[1])],
                      "edges": [{"src": f"{a[0]}/s{a[1]}", "dst": f"{b[0]}/s{b[1]}",
                                 "send": send} for (a, b), send in sorted(edges.items())]},
            "devices": list(devices.values())}


def plan_svg(plan) -> str:
    """A standalone SVG drawing of ``plan``."""
    from tensorvm.scheduler_ext.page import graph_svg
    return graph_svg(plan_graph(plan))
