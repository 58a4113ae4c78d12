"""The step pipeline (DESIGN.md "One step, end to end"): each pass is a pure function from one
plain data structure to the next, with no session or cluster inside.

    nodes = snapshot(graph)
    nodes = prune(nodes, fetches, targets, feeds)
    nodes, fetches, targets = optimize(nodes, fetches, targets, feeds)
    devices = place(nodes, default_device, ...)
    nodes, devices, fetches, targets = unroll(...)   # only for run(..., steps=K) across devices
    part = partition(nodes, devices, feeds)
    stages = stage(part)
    plan = compile_plan(part, stages, fetches, feeds, ...)

The session threads one frozen :class:`Step` through them (:mod:`tensorvm.passes.step`):
``run_pipeline(Step.start(snapshot(graph), fetches, targets, feeds), pipeline(...))``.
"""
from .prune import prune
from .optimize import optimize
from .place import place
from .partition import Partition, partition
from .stage import stage
from .unroll import unroll
from .compile import Plan, compile_plan
from .step import Step, pipeline, run_pipeline
from ..vm import services as _services


def plan_body(nodes: dict, owners: dict, fetches: tuple, feeds: tuple, device: str,
              host_feeds=()) -> Plan:
    """The plan of a loop's cond or body (``nodes``, reading ``owners``' resources) on
    ``device``, its outputs left on the device; loop kernels ask for it through
    :mod:`tensorvm.vm.services` (the op families do not import the passes)."""
    step = Step({**owners, **nodes}, nodes, fetches, (), feeds)
    return run_pipeline(step, pipeline(device, gpu_available="GPU" in device,
                                       fetch_to_host=False, host_feeds=host_feeds)).plan


_services.provide("plan_body", plan_body)

__all__ = ["prune", "optimize", "place", "partition", "Partition", "stage", "compile_plan",
           "Plan", "unroll", "Step", "pipeline", "run_pipeline"]
