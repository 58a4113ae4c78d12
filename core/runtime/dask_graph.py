"""One submission of a compiled plan as a Dask graph, and reading its results back.

A leaf shared by both backends (:mod:`tensorvm.runtime.backends`, :mod:`tensorvm.runtime.dask_plane`):
it imports only the stage runtime and :mod:`.durable_tasks`.

``step_graph`` turns a :class:`~tensorvm.passes.Plan` into a Dask graph for one submission:
each (device, stage) task is ``(run_stage, program, rt, step_id, steps, *inputs)`` in process,
or — once the plan is registered on the workers (:mod:`tensorvm.runtime.direct.registered_plans`) —
``(run_registered, plan_id, device, task, step_id, steps, trace, *inputs)``, which carries
no program, or ``(run_durable, url, run_stage, ...)`` for a floating root task whose
outputs are kept (``durable``); each non-elided Send is ``(pick, stage key, index)``; feeds
are inlined as arguments. Keys are ``(task name, step id)`` (step ids are ``token.N``, one per submission).
A task's result is a :class:`~tensorvm.vm.results.StageResult`, indexed by export.
"""
from __future__ import annotations

from collections import defaultdict

from ..framework.device_spec import DeviceSpec
from .direct.registered_plans import run_registered
from .durable_tasks import run_durable
from ..vm.interpreter import pick, run_stage, run_stage_traced
from ..vm.program import Feed, Recv, Result


def step_graph(plan, feed_values, step_id: str, steps: int, rt, trace: bool = False,
               plan_id: str | None = None, durable: str = ""):
    """Return ``(dsk, output_keys, keys_by_device)`` for one submission of ``plan``.

    ``steps`` > 1 loops inside the one task of a single-task plan; a plan of several tasks
    runs K steps as an unrolled plan (:func:`tensorvm.passes.unroll`) instead. With
    ``plan_id`` the tasks name the registered partition instead of carrying its program.
    ``durable``: a storage URL under which each floating root task (it reads no other task's
    output) keeps its exports, read back if Dask runs it again (:mod:`.durable_tasks`).
    On a cluster (``rt`` None: the results stay on the workers) an output task is asked for
    through a pick of its fetched exports (:func:`pick_fetched`), so only those travel to the
    client: a map task's counters, not its shuffle buckets (issue 23: a 200 MB TeraSort
    brought every bucket to the driver, ~0.8 s of its 1.4 s); a task whose exports are all
    fetched is gathered whole, with no pick task (a training step's, on the Dask plane).

    >>> import tensorvm as tv
    >>> g = tv.Graph()
    >>> with g.as_default():
    ...     c = tv.constant(2.0) * 3.0
    >>> with tv.Session(graph=g) as s:
    ...     plan = s.plan(c)
    >>> dsk, outs, by_dev = step_graph(plan, [], "t.0", 1, None)
    >>> [k[1] for k in outs]
    ['t.0']
    """
    if steps > 1 and len(plan.tasks) != 1:
        raise ValueError("steps > 1 needs a single-task plan; unroll the plan instead")
    dsk: dict = {}
    by_device: dict = defaultdict(list)
    fn = run_stage_traced if trace else run_stage
    task_keys = {t.name: (t.name, step_id) for t in plan.tasks}
    send_keys = {}
    for s in plan.sends:
        if s.elided:
            continue
        key = (_send_name(s.task, s.index), step_id, s.index)
        dsk[key] = (pick, task_keys[s.task], s.index)
        send_keys[s.name] = key
        by_device[s.device].append(key)
    for t in plan.tasks:
        deps = []
        for a in t.args:
            if a.__class__ is Result:
                deps.append(task_keys[a.task])
            elif a.__class__ is Recv:
                deps.append(send_keys[a.send])
            else:  # a Feed: fed values travel inline with the task that reads them
                deps.append(feed_values[a.index])
        if plan_id is None and durable and _root(t) and DeviceSpec.parse(t.device).floating:
            dsk[task_keys[t.name]] = (run_durable, f"{durable}/{t.name}-{step_id}.arrow", fn,
                                      t.program, rt, step_id, steps, *deps)
        elif plan_id is None:
            dsk[task_keys[t.name]] = (fn, t.program, rt, step_id, steps, *deps)
        else:
            dsk[task_keys[t.name]] = (run_registered, plan_id, t.device, t.name, step_id,
                                      steps, trace, *deps)
        by_device[t.device].append(task_keys[t.name])
    if rt is not None:  # in process: the results are here already
        return dsk, [task_keys[n] for n in plan.outputs], by_device
    fetched: dict = defaultdict(list)
    for f in plan.fetches:
        if f.__class__ is Result:
            fetched[f.task].append(f.index)
    devices = {t.name: t.device for t in plan.tasks}
    exports = {t.name: len(t.program.exports) for t in plan.tasks}
    outputs = []
    for n in plan.outputs:
        wanted = set(fetched[n])
        if len(wanted) == exports[n]:  # every export fetched: no pick (a task less a step)
            outputs.append(task_keys[n])
            continue
        key = (_send_name(n, "fetch"), step_id, "fetch")  # (a Send to the client)
        dsk[key] = (pick_fetched, task_keys[n], tuple(sorted(wanted)))
        by_device[devices[n]].append(key)
        outputs.append(key)
    return dsk, outputs, by_device


def pick_fetched(values, indices: tuple) -> dict:
    """The client's share of an output task: ``{index: export}`` of its fetched exports
    (none for a sink: the client only waits for it)."""
    return {i: values[i] for i in indices}


def _root(task) -> bool:
    """Whether ``task`` reads no other task's output (only feeds)."""
    return all(a.__class__ is Feed for a in task.args)


def _send_name(task: str, index) -> str:
    """The key name of the pick of export ``index`` (or ``"fetch"``: the client's) of
    ``task``: ``<task>-send``; a floating task's (``<name>-<group>``, see
    :func:`tensorvm.passes.compile._task_name`) ``<name>_send-<group>_<index>``, so that its
    picks are a Dask task prefix apart from the map tasks (their own bar in Dask's progress,
    ``<name>_send``), and each pick is a Dask task group of its own: a group larger than
    twice the cluster's threads with one upstream task is root-ish to Dask, queued and handed
    to any free thread, and a map task's 2R picks then ran on the other worker, copying the
    whole stage result there (issue 23). A pinned pick has its device's resource, which Dask
    never counts root-ish.

    >>> _send_name("tvm_g1_ps_0_cpu0_s0", 2), _send_name("tvm_g1_worker_float_cpu0_s0-map3", 2)
    ('tvm_g1_ps_0_cpu0_s0-send', 'tvm_g1_worker_float_cpu0_s0_send-map3_2')
    """
    base, dash, group = task.rpartition("-")
    return f"{base}_send-{group}_{index}" if dash and "_float_" in base else f"{task}-send"


def fill_metadata(md, plan, infos) -> None:
    """Fill a ``RunMetadata`` from a step's trace records (one per task): the records, and
    the bytes each Send moved."""
    if md is None:
        return
    md.plan = plan
    md.step_stats.extend(infos)
    sizes = {i["task"]: i.get("export_bytes", []) for i in infos}
    for s in plan.sends:
        b = sizes.get(s.task)
        md.sends.append({"tensor": f"{s.pair.tensor[0]}:{s.pair.tensor[1]}", "src": s.pair.src,
                         "dst": s.pair.dst,
                         "bytes": b[s.index] if b and s.index < len(b) else None})


def fetch_values(plan, outputs, results, feed_values) -> list:
    """The plan's fetches, in order, from the results of its output tasks (``outputs`` are
    their keys, in the order of ``plan.outputs``: each a stage result, or on a cluster the
    :func:`pick_fetched` of one) and the fed values."""
    by_task = dict(zip(plan.outputs, results))
    out = []
    for f in plan.fetches:
        if f.__class__ is Feed:
            out.append(feed_values[f.index])
        else:
            out.append(by_task[f.task][f.index])
    return out
