"""Every runnable example, collected automatically; no list is kept by hand.

* The package's docstrings: each module of ``tensorvm`` (core, storage, mapreduce,
  scheduler_ext, jobs) whose docstrings hold examples is one test, run in a fresh default graph.
* README.md's ```` ```python ```` blocks, each one test: a block with an
  ``if __name__ == "__main__":`` guard runs as a script in a fresh Python (it starts a cluster);
  a block whose first line is ``# name.py`` is a file the README's commands use (written out and
  run through the ``tensorvm`` command); every other block runs in this process, in a fresh
  default graph. A line's ``# prints: TEXT`` comment is checked: TEXT must be in the block's
  output. A block that cannot run here is preceded by ``<!-- not run: why -->``.
"""
import contextlib
import doctest
import importlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tensorvm.tools.imports import _package_modules

ROOT = Path(__file__).resolve().parents[1]
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
    for name in ("tensorvm", "tensorvm.framework.op_registry", "tensorvm.passes.prune",
                 "tensorvm.framework.tensor_conversion", "tensorvm.runtime.cluster.spec", "tensorvm.storage.checkpoint"):
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
    bad = subprocess.run([sys.executable, "-m", "bench", "bench_no_such"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2, bad.stderr
    assert "unknown benchmark 'bench_no_such'" in bad.stderr
    assert "bench_step" in bad.stderr  # the list of those there are
    listed = subprocess.run([sys.executable, "-m", "bench", "--list"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert listed.returncode == 0, listed.stderr
    assert {"bench_planning", "bench_step", "bench_wordcount"} <= set(listed.stdout.split())


# ---- README.md -------------------------------------------------------------------------------
_BLOCK = re.compile(r"(<!--\s*not run:(?P<why>.*?)-->\s*\n)?```(?P<lang>[\w-]*)\n(?P<code>.*?)```",
                    re.DOTALL)
_PRINTS = re.compile(r"#\s*prints:\s*(.+?)\s*$", re.MULTILINE)


def readme_blocks(text: str) -> list[dict]:
    """The Python blocks of a README: ``{line, code, kind, why, prints}`` each; ``kind`` is
    ``script`` (has a ``__main__`` guard), ``file`` (first line ``# name.py``), ``skip`` (after
    a ``<!-- not run: ... -->`` comment) or ``inprocess``."""
    out = []
    for m in _BLOCK.finditer(text):
        if m["lang"] != "python":
            continue
        code = m["code"]
        first = code.splitlines()[0].strip() if code.strip() else ""
        if m["why"] is not None:
            kind = "skip"
        elif 'if __name__ == "__main__":' in code:
            kind = "script"
        elif re.fullmatch(r"#\s*[\w-]+\.py", first):
            kind = "file"
        else:
            kind = "inprocess"
        out.append({"line": text.count("\n", 0, m.start("code")) + 1, "code": code,
                    "kind": kind, "why": (m["why"] or "").strip(),
                    "prints": _PRINTS.findall(code)})
    return out


def check_prints(block: dict, output: str) -> None:
    """Every ``# prints: TEXT`` of ``block`` appears in ``output`` (spaces compared loosely)."""
    norm = " ".join(output.split())
    for want in block["prints"]:
        assert " ".join(want.split()) in norm, (
            f"README.md line {block['line']}: expected output containing {want!r}, got:\n"
            f"{output}")


def run_inprocess(block: dict, cwd: Path) -> str:
    """Run ``block`` in this process in a fresh default graph, in ``cwd``; its output."""
    import tensorvm as tv
    tv.reset_default_graph()
    buf, old = io.StringIO(), os.getcwd()
    os.chdir(cwd)  # contextlib.chdir is Python >= 3.11
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(block["code"], f"README.md:{block['line']}", "exec"),  # noqa: S102
                 {"__name__": "readme_block"})
    finally:
        os.chdir(old)
    return buf.getvalue()


def run_script(block: dict, cwd: Path, timeout: float = 240) -> str:
    """Run ``block`` as a script in a fresh Python in ``cwd``; its output (fails on exit != 0)."""
    path = cwd / "readme_block.py"
    path.write_text(block["code"])
    proc = subprocess.run([sys.executable, str(path)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, (f"README.md line {block['line']} exited {proc.returncode}:\n"
                                  f"{proc.stdout}\n{proc.stderr[-3000:]}")
    return proc.stdout


BLOCKS = readme_blocks((ROOT / "README.md").read_text())


def _ids(kind):
    return [f"line{b['line']}" for b in BLOCKS if b["kind"] == kind]


def test_every_readme_python_block_is_run_or_says_why_not():
    assert len(BLOCKS) >= 6, [b["line"] for b in BLOCKS]
    assert {"inprocess", "script", "file"} <= {b["kind"] for b in BLOCKS}
    for b in BLOCKS:
        assert b["kind"] != "skip" or b["why"], f"line {b['line']}: say why it is not run"
    assert sum(b["kind"] == "skip" for b in BLOCKS) <= 2, "most blocks must run"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b["kind"] == "inprocess"],
                         ids=_ids("inprocess"))
def test_readme_block_in_process(block, tmp_path):
    check_prints(block, run_inprocess(block, tmp_path))


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b["kind"] == "script"],
                         ids=_ids("script"))
def test_readme_block_as_a_script(block, tmp_path):
    check_prints(block, run_script(block, tmp_path))


@pytest.mark.parametrize("block", [b for b in BLOCKS if b["kind"] == "file"], ids=_ids("file"))
def test_readme_job_file_runs_with_the_cli(block, tmp_path):
    """The README's job file, run as its commands show (in process here: no cluster)."""
    name = block["code"].splitlines()[0].strip().lstrip("#").strip()
    (tmp_path / name).write_text(block["code"])
    ckpt = (tmp_path / "ckpt" / "model").as_uri()
    proc = subprocess.run(
        [sys.executable, "-m", "tensorvm", "run", name, "--in-process", "--steps", "100",
         "--ckpt", ckpt, "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["state"] == "done", summary
    if "fit" in summary["job"]:  # the README's example: y = 3x + 1
        assert summary["result"] == pytest.approx({"w": 3.0, "b": 1.0}, abs=0.01)
    verify = subprocess.run([sys.executable, "-m", "tensorvm", "ckpt", "verify", ckpt + "-100"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            check=False)
    assert verify.returncode == 0 and "OK" in verify.stdout, verify.stdout + verify.stderr


def test_a_broken_or_wrong_readme_block_fails(tmp_path):
    """The harness itself: an exception, a wrong ``# prints:`` and a failing script all fail."""
    text = ("```python\nraise ValueError('boom')\n```\n"
            "```python\nprint(1 + 1)  # prints: 3\n```\n"
            "```python\nimport sys\nif __name__ == \"__main__\":\n    sys.exit(3)\n```\n"
            "<!-- not run: an example -->\n```python\nundefined_name\n```\n")
    broken, wrong, script, skipped = readme_blocks(text)
    assert [b["kind"] for b in (broken, wrong, script, skipped)] == \
        ["inprocess", "inprocess", "script", "skip"]
    with pytest.raises(ValueError, match="boom"):
        run_inprocess(broken, tmp_path)
    with pytest.raises(AssertionError, match="expected output containing '3'"):
        check_prints(wrong, run_inprocess(wrong, tmp_path))
    with pytest.raises(AssertionError, match="exited 3"):
        run_script(script, tmp_path)
