"""The GPU op sweep (issue 15): run tensorvm's op tests with every op on a GPU device.

Opt-in, never part of the default suite run::

    .venv/bin/python -m pytest -q -p no:cacheprovider -p tests.fakegpu_plugin tests/test_ops_*.py

It makes ``/job:localhost/replica:0/task:0/device:GPU:0`` the in-process session's default
device, so every op placed nowhere else asks for the GPU (soft placement still moves the ops
marked CPU-only, such as string ops, to the CPU, with host<->device copies around them), and
with no further option it installs ``tests/fake_device.py`` as the device backend: a CuPy-like
namespace that keeps data on the host but refuses implicit conversion to NumPy and NumPy
arrays mixed into device computations, as CuPy does. A kernel that creates with ``np.zeros``
instead of the namespace of its inputs, or hands a device array to code that needs a host
one, fails here as it would on a GPU.

On a machine with CuPy and a GPU (the lent device machine), run the same sweep on the real
device::

    TENSORVM_GPU_SWEEP=cupy .venv/bin/python -m pytest -q -p no:cacheprovider \\
        -p tests.fakegpu_plugin tests/test_ops_*.py

(CuPy stays the backend; the plugin only moves the default device.) On the fake device the
terminal summary lists, per op type, the copies to the host its GPU kernel made per call
(where a real GPU makes the host wait), each marked "TF too" with why (:data:`TF_WAITS_TOO`:
a predicate computed on the device, an output sized by the data...) or "to remove", then the
totals: waits inside kernels (those to remove) apart from the explicit device-to-host copies. It lists the op types whose GPU kernel failed — the ``for op 'name' (Type)`` of the runtime's
error — with counts. Failures that name no op are not kernel failures: a test that asserts
CPU device strings or plan layouts, or compares exactly where a GPU's rounding differs; read
them, don't count them. The tests known to assert a CPU default device are skipped, each with
its reason (:data:`SKIP`).
"""
from __future__ import annotations

import os
import re
import sys
from collections import Counter

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
COPY_TO_HOST = "_CopyDeviceToHost"
_OP = re.compile(r"for op '[^']*' \(([A-Za-z0-9_]+)\)")


# Tests whose assertions are about the CPU default device itself (device strings, plan layouts,
# the absence of a GPU): with GPU:0 as the default they test something else, so the sweep skips
# them, with the reason, instead of counting them as failures.
_CPU_PREMISE = "asserts CPU device strings or the plan of a CPU default device"
SKIP = {
    "tests/test_session.py::test_trace_fills_run_metadata":
        _CPU_PREMISE + " (step_stats devices end in CPU:0)",
    "tests/test_passes.py::test_gpu_soft_placement_falls_back_to_cpu":
        "needs a session without a GPU (expects 'no GPU device' without soft placement)",
    "tests/test_passes.py::test_partition_counts_match_on_a_built_graph":
        _CPU_PREMISE + " (its expected transfers name CPU:0 devices)",
    "tests/test_step_pipeline.py::test_session_plans_through_the_step_pipeline":
        _CPU_PREMISE + " (the plan's text, with no host<->device copies)",
    "tests/test_step_pipeline.py::test_log_device_placement_logs_each_op":
        _CPU_PREMISE + " (the logged placements name CPU:0)",
    "tests/test_step_pipeline.py::test_trace_level_full_trace_fills_run_metadata":
        _CPU_PREMISE + " (step_stats devices are CPU:0)",
    "tests/test_gpu.py::test_a_gpu_n_program_runs_inside_cuda_device_n":
        _CPU_PREMISE + " (its unplaced op 'z' must run on the CPU, entering no device)",
    "tests/test_core_correctness.py::"
    "test_variable_built_in_colocate_with_initialises_on_that_device":
        _CPU_PREMISE + " (the colocated variable's device is ps CPU:0)",
    "tests/test_mapreduce.py::test_plan_has_a_send_recv_per_bucket":
        _CPU_PREMISE + " (its send count has no host<->device copies)",
    "tests/test_runtime_inprocess.py::test_timed_out_step_never_applies_its_update":
        "joins the thread that ran the blocked kernel, which ends only for a one-task plan; "
        "with the update on GPU:0 the plan has two tasks, run on dask.threaded's pool of the "
        "step's thread, which outlives the step until dask's next cleanup (the update still "
        "never lands: tests/test_gpu.py::test_a_timed_out_cpu_to_gpu_step_never_applies_its_"
        "update)",
}
_HOST_ONLY = ("asserts a host-array fast path: {} (device arrays keep the one-source "
              "kernels)")
for _name in ("test_large_matmul_runs_on_torch_and_matches_numpy",
              "test_matmul_gradient_on_torch", "test_numeric_gradients_on_torch",
              "test_max_pool_gradient_through_a_session_on_torch",
              "test_a_cnn_step_on_torch_pools_once_per_layer"):
    SKIP[f"tests/test_cpu_accel.py::{_name}"] = _HOST_ONLY.format(
        "PyTorch's CPU kernels take NumPy arrays only")
for _name in ("test_a_dead_fresh_intermediate_is_written_in_place",
              "test_a_training_step_gives_the_same_bits_with_forwarding",
              "test_small_arrays_are_not_offered"):
    SKIP[f"tests/test_forwarding.py::{_name}"] = _HOST_ONLY.format(
        "buffer forwarding offers NumPy buffers only")
for _name in ("test_a_scatter_update_writes_in_place_only_when_no_reader_holds_the_value",
              "test_gradient_descent_updates_in_place_with_the_copys_bits"):
    SKIP[f"tests/test_runtime_inprocess.py::{_name}"] = _HOST_ONLY.format(
        "updates write in place only into a NumPy buffer (sole_holder)")
SKIP["tests/test_training_ops.py::test_momentum_adagrad_adam_update_in_place_when_nothing_"
     "holds_the_value"] = _HOST_ONLY.format(
    "updates write in place only into a NumPy buffer (sole_holder), a device array's are "
    "copy on write")


def pytest_collection_modifyitems(config, items):
    import pytest
    for item in items:
        why = SKIP.get(item.nodeid.split("[")[0])
        if why is not None:
            item.add_marker(pytest.mark.skip(reason=f"GPU sweep: {why}"))


def pytest_configure(config):
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    from tensorvm.runtime.backends import LocalBackend
    mode = os.environ.get("TENSORVM_GPU_SWEEP", "fake")
    if mode == "cupy":
        from tensorvm.vm.kernels import array_api as kernels_gpu
        if kernels_gpu.gpu_count() < 1:
            raise RuntimeError("TENSORVM_GPU_SWEEP=cupy: CuPy finds no GPU in this process")
    elif mode == "fake":
        import fake_device
        fake_device.install()
        _count_waits(fake_device)
    else:
        raise RuntimeError(f"TENSORVM_GPU_SWEEP must be 'fake' or 'cupy', got {mode!r}")
    config._tvm_gpu_sweep = (mode, LocalBackend.__dict__.get("default_device"))
    LocalBackend.default_device = GPU0


# Waits TF's GPU kernels make too (or that the design takes on purpose), with why: the sweep
# lists every other op type that waits as one to remove.
TF_WAITS_TOO = {
    "DynamicPartition": "its outputs' sizes are its counts (TF copies them too)",
    "While": "a predicate computed on the device (TF's LoopCond: HostMemory)",
    "StatelessWhile": "a predicate computed on the device (TF's LoopCond: HostMemory)",
    "WhileGrad": "the forward loop's device predicates, replayed",
    "Switch": "a predicate computed on the device (TF's Switch: HostMemory(\"pred\"))",
    "CheckNumerics": "the 'any NaN or Inf?' flag (TF's GPU kernel copies it too)",
    "Where": "its output's size, the number of true elements (TF's GPU Where copies it too)",
    "BooleanMask": "its output's size (TF builds it of Where and a gather)",
    "Unique": "its output's size (TF's GPU Unique copies the count too)",
    "UniqueWithCounts": "its output's size (TF's GPU Unique copies the count too)",
    "Multinomial": "the host's generator: a seed draws the CPU's numbers",
    "RandomShuffle": "the host's generator (TF has no GPU kernel for it)",
}
_WAITS: Counter = Counter()  # op type -> copies to the host its GPU kernel made
_CALLS: Counter = Counter()


def _count_waits(fake_device):
    """Count, per op type, the copies to the host (``xp.cuda.syncs``) that GPU kernels make:
    each is a place where a real GPU makes the host wait for its queued kernels."""
    from tensorvm.vm import interpreter as runtime
    table = runtime._kernel_table

    def counted(device_type):
        kernels = table(device_type)
        if device_type != "GPU":
            return kernels

        def wrap(op_type, kernel):
            def run(*args, **kw):
                before = fake_device.xp.cuda.syncs
                try:
                    return kernel(*args, **kw)
                finally:
                    _CALLS[op_type] += 1
                    _WAITS[op_type] += max(fake_device.xp.cuda.syncs - before, 0)
            return run
        return {t: wrap(t, k) for t, k in kernels.items()}
    runtime._kernel_table = counted
    runtime._tvm_sweep_table = table


def pytest_unconfigure(config):
    mode, prev = getattr(config, "_tvm_gpu_sweep", (None, None))
    if mode is None:
        return
    from tensorvm.runtime.backends import LocalBackend
    if prev is None:
        if "default_device" in LocalBackend.__dict__:
            del LocalBackend.default_device
    else:
        LocalBackend.default_device = prev
    if mode == "fake":
        import fake_device
        fake_device.restore(None)
        from tensorvm.vm import interpreter as runtime
        runtime._kernel_table = getattr(runtime, "_tvm_sweep_table", runtime._kernel_table)


def pytest_report_header(config):
    mode = os.environ.get("TENSORVM_GPU_SWEEP", "fake")
    return f"tensorvm GPU op sweep: default device {GPU0}, device backend: {mode}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    failed = terminalreporter.stats.get("failed", [])
    ops: Counter = Counter()
    no_op = []
    for rep in failed:
        text = getattr(rep, "longreprtext", "") or str(rep.longrepr)
        found = set(_OP.findall(text))
        ops.update(found)
        if not found:
            no_op.append(rep.nodeid)
    terminalreporter.section("tensorvm GPU op sweep")
    waits = [(t, n) for t, n in _WAITS.items() if n]
    if waits:
        terminalreporter.write_line("GPU kernels that copied to the host (a real GPU waits "
                                    "there), per call:")
        for t, n in sorted(waits, key=lambda tn: -tn[1] / _CALLS[tn[0]]):
            why = TF_WAITS_TOO.get(t)
            tag = f": TF too, {why}" if why else "" if t == COPY_TO_HOST else ": to remove"
            terminalreporter.write_line(f"  {n / _CALLS[t]:5.2f}  {t} ({_CALLS[t]} calls)"
                                        f"{tag}")
    if _CALLS:
        # the explicit copies (a fetch, a CPU op's input, a HostMemory input made on the
        # device) apart from the waits hidden inside kernels
        copies = _WAITS[COPY_TO_HOST]
        inside = sum(_WAITS.values()) - copies
        too = sum(n for t, n in _WAITS.items() if t in TF_WAITS_TOO)
        terminalreporter.write_line(
            f"total: {inside} waits inside kernels ({inside - too} to remove), {copies} "
            f"{COPY_TO_HOST} copies, in {sum(_CALLS.values())} GPU kernel calls")
    if not failed:
        terminalreporter.write_line("every test passed with ops on the GPU")
        return
    for op_type, n in ops.most_common():
        terminalreporter.write_line(f"{n:5d}  {op_type}")
    terminalreporter.write_line(f"{len(no_op)} failures name no op (placement/plan assertions, "
                                "rounding): read them")
