"""``pip install .`` gives ``import tensorvm`` with every subpackage, from outside the repo."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_installs_and_imports_outside_the_repo(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(ROOT)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("tensorvm-*.whl")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, cwd=tmp_path)
    code = (
        "import tensorvm as tv, tensorvm.storage, tensorvm.mapreduce, tensorvm.scheduler_ext,"
        " tensorvm.jobs.cli, tensorvm.train, tensorvm.passes;"
        "x = tv.placeholder(tv.float32, [2]);"
        "print(tv.__file__); print(tv.Session().run(tv.reduce_sum(x * 2.0), {x: [1, 2]}))")
    out = subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path,
                         capture_output=True, text=True,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}).stdout
    file_line, value = out.strip().splitlines()
    assert file_line.startswith(str(target))  # the installed copy, not the checkout
    assert float(value) == 6.0


def test_cli_entry_point_runs_and_rejects_bad_arguments():
    exe = Path(sys.executable).parent / "tensorvm"
    ok = subprocess.run([str(exe), "version"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip()
    bad = subprocess.run([str(exe), "demo", "--steps", "0"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "--steps" in bad.stderr
