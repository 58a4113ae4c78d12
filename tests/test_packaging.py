"""``pip install .`` gives ``import tensorvm`` with every subpackage, from outside the repo.

The wheel is built from a copy of the working tree's files (tracked, and untracked ones git
does not ignore), so the checkout's ``build/`` (left over from an older layout) neither leaks
into the wheel under test nor grows with each run. It is installed with ``pip install
--target`` and imported in a subprocess whose path has the install first and not the
checkout (``python -I``, so neither the current directory nor ``PYTHONPATH`` count; the
interpreter's site-packages stay, for NumPy and Dask).
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# where each installed package's source lives (pyproject's package-dir)
SOURCE_DIRS = {"tensorvm": "core", "tensorvm/storage": "storage", "tensorvm/mapreduce": "mapreduce",
               "tensorvm/scheduler_ext": "scheduler_ext", "tensorvm/jobs": "jobs"}
# old module paths (core/_aliases.py) -> the file that holds their code now
OLD_PATHS = {"tensorvm.session": "runtime/session.py",
             "tensorvm.ops.math_ops": "ops/math/math_ops.py",
             "tensorvm.cluster": "runtime/cluster/spec.py",
             "tensorvm.local_cluster": "runtime/cluster/local.py",
             "tensorvm.distributed_backend": "runtime/dask_plane.py",
             "tensorvm.registry": "framework/op_registry.py"}


def _source_packages() -> set[str]:
    """Every package of the source tree, as installed (``tensorvm/ops/math`` …)."""
    found = set()
    for installed, src in SOURCE_DIRS.items():
        for init in (ROOT / src).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / src).as_posix()
            found.add(installed if rel == "." else f"{installed}/{rel}")
    return found


def _run_installed(target: Path, code: str, cwd: Path) -> str:
    """Run ``code`` in a fresh interpreter that sees ``target`` first and not the checkout."""
    prelude = f"import sys; sys.path.insert(0, {str(target)!r});"
    out = subprocess.run([sys.executable, "-I", "-c", prelude + code], cwd=cwd,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The project built into a wheel and installed with ``pip install --target``."""
    tmp = tmp_path_factory.mktemp("packaging")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    tree = tmp / "tree"
    for name in filter(None, files):
        if (ROOT / name).is_file():  # a tracked file deleted in the working tree is not
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    wheels = tmp / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(tree)], check=True, cwd=tmp)
    (wheel,) = wheels.glob("tensorvm-*.whl")
    target = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, cwd=tmp)
    return target


@pytest.mark.slow
def test_wheel_carries_every_package_of_the_source_tree(installed):
    packages = {init.parent.relative_to(installed).as_posix()
                for init in (installed / "tensorvm").rglob("__init__.py")}
    assert packages == _source_packages()  # a package missing from pyproject is not installed


@pytest.mark.slow
def test_every_installed_package_and_old_path_imports_from_the_install(installed, tmp_path):
    code = (
        "import importlib, json, tensorvm as tv;"
        f"names = {sorted(p.replace('/', '.') for p in _source_packages())!r}"
        f" + {sorted(OLD_PATHS)!r};"
        "x = tv.placeholder(tv.float32, [2]);"
        "value = float(tv.Session().run(tv.reduce_sum(x * 2.0), {x: [1, 2]}));"
        "print(json.dumps({'value': value,"
        " 'files': {n: importlib.import_module(n).__file__ for n in names}}))")
    got = json.loads(_run_installed(installed, code, tmp_path).strip().splitlines()[-1])
    assert got["value"] == 6.0
    for name, file in got["files"].items():
        assert Path(file).is_relative_to(installed), (name, file)  # not the checkout
    for old, new in OLD_PATHS.items():
        assert Path(got["files"][old]) == installed / "tensorvm" / new


@pytest.mark.slow
def test_a_stale_module_of_the_old_layout_does_not_shadow_its_alias(installed, tmp_path):
    # a wheel built in a checkout whose build/ predates the move carries the old files too
    # (setuptools copies the whole of build/lib); the old path must still be the moved module
    target = tmp_path / "site"
    shutil.copytree(installed, target)
    (target / "tensorvm" / "session.py").write_text("raise ImportError('the stale copy')\n")
    out = _run_installed(target, "import tensorvm.session as s; print(s.__file__)", tmp_path)
    assert Path(out.strip()) == target / "tensorvm" / "runtime" / "session.py"


def test_cli_entry_point_runs_and_rejects_bad_arguments():
    exe = Path(sys.executable).parent / "tensorvm"
    ok = subprocess.run([str(exe), "version"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip()
    bad = subprocess.run([str(exe), "demo", "--steps", "0"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "--steps" in bad.stderr
