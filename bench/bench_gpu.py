"""GPU benchmark and real-GPU check (issue 15).

The benchmark: an MLP 4096-4096-4096 training step on batch 1024 (ReLU, softmax cross-entropy,
plain SGD), ms per step on the GPU, on the CPU, and the same step written by hand in CuPy.
Target: tensorvm on the GPU within 1.2x of hand-written CuPy.

    python -m bench.bench_gpu [--steps 20] [--rounds 5] [--cpu-steps 2]

Skips with a message when CuPy finds no GPU. Timings are medians of interleaved rounds; each
round ends in a fetch of the loss (a device sync), so queued GPU work is counted.

Everything issue 15 needs from a real GPU, in one table (``--all``): the environment (CuPy,
device, CUDA), the GPU tests (``tests/test_gpu*.py``: their real-GPU tests run where CuPy finds
a device, and the fake device's claims about CuPy are checked against CuPy), the op sweep with
every op on ``GPU:0`` on CuPy (``TENSORVM_GPU_SWEEP=cupy``) and the benchmark::

    python -m bench.bench_gpu --all [--only env,tests,sweep,bench] [--log-dir DIR]

Each part runs under its own time limit (``--part-timeout``); the pytest logs go to
``--log-dir`` (``$OUT`` on the lent machine, so they come back). Where ``tensorvm`` is not
installed (a bare checkout), the script lays out an importable ``tensorvm`` from the checkout
in a temporary folder, as pyproject's ``package-dir`` does.

On the lent GPU machine (device tool; its image has CuPy, NumPy, pytest, pyarrow... but no
Dask), carry the missing wheels. Here, once (``.whl`` ignored by ``.git/info/exclude``)::

    python -m bench.bench_gpu --wheels .whl     # pip download, for the machine's Python 3.12

then, in one ``run`` call (carry ``.whl``; two calls if one would pass 10 minutes, say
``--only env,tests,bench`` and ``--only sweep``)::

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl &&
    PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 python3 -m bench.bench_gpu --all --log-dir $OUT
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

D, B, C = 4096, 1024, 4096


def _no_gpu_reason():
    try:
        import cupy
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - ImportError or a CUDA library error
        return f"no GPU: {type(e).__name__}: {e}"
    return None if n > 0 else "no GPU: CuPy sees 0 devices"


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, D)).astype(np.float32)
    y = rng.integers(0, C, B).astype(np.int64)
    w1 = (rng.standard_normal((D, D)) * (2.0 / D) ** 0.5).astype(np.float32)
    w2 = (rng.standard_normal((D, C)) * (1.0 / D) ** 0.5).astype(np.float32)
    return x, y, w1, w2


def tensorvm_step(device: str):
    """A session and a ``run(k)`` that runs k training steps and returns the last loss."""
    import tensorvm as tv
    x_np, y_np, w1_np, w2_np = _data()
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [B, D])
        y = tv.placeholder(tv.int64, [B])
        with tv.device(device):
            w1, w2 = tv.Variable(w1_np), tv.Variable(w2_np)
            h = tv.nn.relu(tv.matmul(x, w1))
            logits = tv.matmul(h, w2)
            loss = tv.reduce_mean(
                tv.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            train = tv.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = tv.global_variables_initializer()
    sess = tv.Session(graph=g)
    sess.run(init)
    plan = sess.plan([loss, train], {x: x_np, y: y_np})
    if "GPU" in device and plan.fallbacks:
        print("\n".join(str(f) for f in plan.fallbacks), file=sys.stderr)
    feed = {x: x_np, y: y_np}

    def run(k):  # fed from the host every step, as a TF feed_dict; the loss read at the end
        for _ in range(k - 1):  # (like the hand step: a fetch each step would make every
            sess.run(train, feed)  # step wait for the device, which the hand step does not)
        return float(sess.run([loss, train], feed)[0])
    return sess, run


def cupy_step():
    """The same step by hand in CuPy (the feed uploaded every step, as tensorvm does)."""
    import cupy as cp
    x_np, y_np, w1_np, w2_np = _data()
    w1, w2 = cp.asarray(w1_np), cp.asarray(w2_np)
    lr = np.float32(0.01)

    def step():
        nonlocal w1, w2
        x, y = cp.asarray(x_np), cp.asarray(y_np)
        a = x @ w1
        h = cp.maximum(a, 0)
        logits = h @ w2
        m = logits.max(axis=1, keepdims=True)
        e = cp.exp(logits - m)
        s = e.sum(axis=1, keepdims=True)
        loss = (cp.log(s)[:, 0] + m[:, 0] - logits[cp.arange(B), y]).mean()
        dlogits = e / s
        dlogits[cp.arange(B), y] -= 1
        dlogits /= B
        dw2 = h.T @ dlogits
        dh = dlogits @ w2.T
        dh *= a > 0
        dw1 = x.T @ dh
        w1 = w1 - lr * dw1
        w2 = w2 - lr * dw2
        return loss

    def run(k):
        out = None
        for _ in range(k):
            out = step()
        return float(out)  # the sync
    return run


def _time(run, k):
    t = time.perf_counter()
    run(k)
    return (time.perf_counter() - t) * 1000 / k


def mlp_bench(steps: int = 20, rounds: int = 5, cpu_steps: int = 2) -> dict:
    """Median ms per step: ``tensorvm GPU``, ``hand CuPy`` (interleaved rounds) and
    ``tensorvm CPU`` (``cpu_steps`` steps; 0 leaves it out)."""
    _, tv_gpu = tensorvm_step("/gpu:0")
    hand = cupy_step()
    tv_gpu(2), hand(2)  # warm up: cuBLAS handles, kernel compilation, the plan cache
    rows = {"tensorvm GPU": [], "hand CuPy": []}
    for _ in range(rounds):  # interleaved rounds
        rows["tensorvm GPU"].append(_time(tv_gpu, steps))
        rows["hand CuPy"].append(_time(hand, steps))
    if cpu_steps:
        _, tv_cpu = tensorvm_step("/cpu:0")
        tv_cpu(1)
        rows["tensorvm CPU"] = [_time(tv_cpu, cpu_steps)]
    return {k: statistics.median(v) for k, v in rows.items()}


# ---- the real-GPU check (--all) ----------------------------------------------------------------
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU_TESTS = ["tests/test_gpu.py", "tests/test_gpu_cluster.py", "tests/test_gpu_waits.py",
             "tests/test_gpu_semantics.py"]
SWEEP_TESTS = ["tests/test_ops_*.py", "tests/test_control_flow.py", "tests/test_train.py",
               "tests/test_tensor_array.py", "tests/test_tf_data.py"]
# What tensorvm needs that the lent machine's image lacks (its image has NumPy, pyarrow,
# fsspec, cloudpickle, msgpack, psutil, click, rich, protobuf, pillow, pytest...: KINDS.md)
MISSING_ON_DEVICE = ("dask", "distributed", "partd", "locket", "tblib", "zict", "tornado",
                     "google-crc32c", "tensorboardX")
SUBPACKAGES = ("storage", "mapreduce", "scheduler_ext", "jobs")


def download_wheels(dest: str) -> int:
    """``pip download`` the wheels of :data:`MISSING_ON_DEVICE`, at this environment's
    versions, for the lent machine (CPython 3.12, x86-64 manylinux) into ``dest``."""
    from importlib import metadata
    pins = [f"{n}=={metadata.version(n)}" for n in MISSING_ON_DEVICE]
    plats = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                         "manylinux2014_x86_64", "manylinux1_x86_64") for a in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", *plats, "-d", dest, *pins]
    print(" ".join(cmd))
    return subprocess.call(cmd)


def _importable_tensorvm() -> str | None:
    """A folder from which ``import tensorvm`` gives this checkout (links laid out as
    pyproject's package-dir), or None when tensorvm imports already."""
    try:
        import tensorvm  # noqa: F401
        return None
    except ImportError:
        pass
    farm = tempfile.mkdtemp(prefix="tvfarm-")
    pkg = os.path.join(farm, "tensorvm")
    os.mkdir(pkg)
    for name in os.listdir(os.path.join(ROOT, "core")):
        os.symlink(os.path.join(ROOT, "core", name), os.path.join(pkg, name))
    for sub in SUBPACKAGES:
        os.symlink(os.path.join(ROOT, sub), os.path.join(pkg, sub))
    sys.path.insert(0, farm)
    return farm


def _environment() -> list:
    rows = [("python", sys.version.split()[0], sys.executable), ("numpy", np.__version__, "")]
    try:
        import cupy
        rt = cupy.cuda.runtime
        n = rt.getDeviceCount()
        name = rt.getDeviceProperties(0)["name"].decode() if n else "-"
        rows += [("cupy", cupy.__version__, f"{n} device(s): {name}"),
                 ("CUDA runtime / driver", f"{rt.runtimeGetVersion()} / "
                                           f"{rt.driverGetVersion()}", "")]
    except Exception as e:  # noqa: BLE001 - ImportError or a CUDA library error
        rows.append(("cupy", "unusable", f"{type(e).__name__}: {e}"))
    try:
        import dask
        rows.append(("dask", dask.__version__, ""))
    except ImportError as e:
        rows.append(("dask", "missing", f"{e}: carry the wheels (--wheels)"))
    return rows


_SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def _pytest(name: str, files: list, env: dict, timeout: int, log_dir) -> tuple:
    """Run pytest on ``files`` (globs), return ``(name, counts, detail)``."""
    paths = sorted({f for pat in files for f in glob.glob(os.path.join(ROOT, pat))})
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
           *(["-p", "tests.fakegpu_plugin"] if name.startswith("op sweep") else []), *paths]
    t = time.perf_counter()
    try:
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=timeout)
        text, rc = out.stdout + out.stderr, out.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = (e.stdout or b"").decode(errors="replace") if isinstance(
            e.stdout, bytes) else (e.stdout or ""), None
    took = time.perf_counter() - t
    if log_dir:
        slug = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")
        with open(os.path.join(log_dir, f"{slug}.log"), "w") as f:
            f.write(text)
    lines = text.strip().splitlines()
    last = lines[-1] if lines else ""
    counts = ", ".join(f"{n} {w}" for n, w in _SUMMARY.findall(last)) or \
        ("timed out" if rc is None else f"rc {rc}: {last[:60]}")
    detail = f"{took:.0f} s"
    if name.startswith("op sweep") and "tensorvm GPU op sweep" in text:
        sweep = text[text.index("tensorvm GPU op sweep"):].splitlines()[1:]
        ops = [ln.strip() for ln in sweep if re.match(r"^\s+\d+\s+\w+$", ln)]
        total = [ln for ln in sweep if ln.startswith("total:")]
        if total:  # (the fake counts its waits; CuPy cannot)
            detail += "; " + total[0]
        if ops:
            detail += "; failing op types: " + ", ".join(ops[:12])
    skipped = sorted({ln.split(": ", 1)[-1] for ln in lines if ln.startswith("SKIPPED")})
    if skipped and not name.startswith("op sweep"):
        detail += "; skipped: " + " | ".join(skipped)[:200]
    return name, counts, detail


def run_all(args) -> int:
    """The real-GPU check: each part's result in one table (see the module docstring)."""
    parts = set(args.only.split(","))
    farm = _importable_tensorvm()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (farm, ROOT, env.get("PYTHONPATH", "")) if p)
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
    rows = []

    def table():
        w = max(len(r[0]) for r in rows)
        print("\n" + "=" * 100)
        for what, result, detail in rows:
            print(f"{what:<{w}}  {result:<24}  {detail}")
        print("=" * 100, flush=True)
    if "env" in parts:
        rows += _environment()
    if "tests" in parts:
        rows.append(_pytest("GPU tests", GPU_TESTS, env, args.part_timeout, args.log_dir))
    if "sweep" in parts:
        sweep_env = dict(env, TENSORVM_GPU_SWEEP="cupy" if _no_gpu_reason() is None else "fake")
        name = "op sweep (CuPy)" if sweep_env["TENSORVM_GPU_SWEEP"] == "cupy" else \
            "op sweep (fake: no GPU)"
        rows.append(_pytest(name, SWEEP_TESTS, sweep_env, args.part_timeout, args.log_dir))
    if "bench" in parts:
        why = _no_gpu_reason()
        if why is not None:
            rows.append(("MLP benchmark", "skipped", why))
        else:
            med = mlp_bench(args.steps, args.rounds, args.cpu_steps)
            for k, v in med.items():
                rows.append((f"MLP step, {k}", f"{v:.2f} ms", f"{D}-{D}-{C}, batch {B}"))
            ratio = med["tensorvm GPU"] / med["hand CuPy"]
            rows.append(("tensorvm GPU / hand CuPy", f"{ratio:.2f}x",
                         "target <= 1.2x: " + ("met" if ratio <= 1.2 else "NOT met")))
    table()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu-steps", type=int, default=2, help="0 skips the CPU run")
    ap.add_argument("--all", action="store_true",
                    help="the real-GPU check: environment, GPU tests, op sweep, benchmark")
    ap.add_argument("--only", default="env,tests,sweep,bench",
                    help="with --all: the parts to run, comma-separated")
    ap.add_argument("--part-timeout", type=int, default=420,
                    help="with --all: seconds for each pytest part")
    ap.add_argument("--log-dir", default=None, help="with --all: where the pytest logs go")
    ap.add_argument("--wheels", metavar="DIR", default=None,
                    help="download the wheels the lent GPU machine lacks into DIR, and stop")
    args = ap.parse_args(argv)
    if args.wheels:
        return download_wheels(args.wheels)
    if args.all:
        return run_all(args)
    why = _no_gpu_reason()
    if why is not None:
        print(f"bench_gpu: skipped ({why})")
        return 0
    med = mlp_bench(args.steps, args.rounds, args.cpu_steps)
    print(f"MLP {D}-{D}-{C}, batch {B}, ms/step (median of {args.rounds} rounds of "
          f"{args.steps} steps):")
    for k, v in med.items():
        print(f"  {k:14s} {v:9.2f}")
    ratio = med["tensorvm GPU"] / med["hand CuPy"]
    print(f"  tensorvm GPU / hand CuPy = {ratio:.2f}x (target <= 1.2x)"
          + (f"; GPU speed-up over CPU {med['tensorvm CPU'] / med['tensorvm GPU']:.1f}x"
             if "tensorvm CPU" in med else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
