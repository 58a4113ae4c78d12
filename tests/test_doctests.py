"""Every runnable example in the package's docstrings, collected automatically: each module of
``tensorvm`` (core, storage, mapreduce, scheduler_ext, jobs) whose docstrings hold examples is
one test, run in a fresh default graph. No list is kept by hand."""
import doctest
import importlib

import pytest

from tensorvm.tools.imports import _package_modules

_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules_with_examples() -> list[str]:
    out = []
    finder = doctest.DocTestFinder()
    for name in sorted(_package_modules()):
        if name.endswith("__main__"):
            continue
        mod = importlib.import_module(name)
        if any(t.examples for t in finder.find(mod, name)):
            out.append(name)
    return out


MODULES = _modules_with_examples()


def test_the_core_modules_are_collected():
    for name in ("tensorvm", "tensorvm.registry", "tensorvm.passes.prune",
                 "tensorvm.tensor_conversion", "tensorvm.cluster", "tensorvm.storage.checkpoint"):
        assert name in MODULES, name


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    import tensorvm as tv
    mod = importlib.import_module(name)
    tv.reset_default_graph()
    result = doctest.testmod(mod, optionflags=_FLAGS, verbose=False, report=True)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0, f"{result.failed} example(s) of {name} failed (see output)"


def test_make_bench_runs_the_benchmarks_it_is_given():
    """``make bench`` is ``python -m bench``: it must start, and run only the modules named."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    bad = subprocess.run([sys.executable, "-m", "bench", "bench_no_such"], cwd=root,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2, bad.stderr
    assert "unknown benchmark 'bench_no_such'" in bad.stderr
    assert "bench_step" in bad.stderr  # the list of those there are
    listed = subprocess.run([sys.executable, "-m", "bench", "--list"], cwd=root,
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert {"bench_planning", "bench_step", "bench_wordcount"} <= set(listed.stdout.split())
