"""The module paths from before ``core/`` was laid out by layer keep working (issue 22 item 8):
as imports, as attributes, and as ``python -m`` targets — each the very module that now
holds the code, so monkeypatching and ``isinstance`` agree."""
import importlib
import subprocess
import sys

import pytest

import tensorvm as tv
from tensorvm import _aliases


@pytest.mark.parametrize("old, new", sorted(_aliases.MOVED.items()))
def test_every_old_path_imports_the_moved_module(old, new):
    assert importlib.import_module(f"tensorvm.{old}") is importlib.import_module(f"tensorvm.{new}")


def test_importing_the_old_paths_keeps_the_public_names():
    for old in _aliases.MOVED:
        importlib.import_module(f"tensorvm.{old}")
    assert callable(tv.gradients) and callable(tv.variable_scope) and callable(tv.ops.while_loop)


def test_old_paths_as_attributes():
    import tensorvm.framework.op_registry as op_registry
    import tensorvm.ops.math.math_ops as math_ops
    assert tv.registry is op_registry
    assert tv.ops.math_ops is math_ops
    with pytest.raises(AttributeError, match="no attribute 'not_a_module'"):
        tv.not_a_module  # noqa: B018


def test_from_old_path_import_name():
    from tensorvm.session import Session
    from tensorvm.ops.math_ops import add
    assert Session is tv.Session and add is tv.add


def test_python_dash_m_on_an_old_path(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import tensorflow as tf\nwith tf.Session() as s:\n"
                    "    print(s.run(tf.constant(2) * 3))\n")
    r = subprocess.run([sys.executable, "-m", "tensorvm.tf_shim", str(prog)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "6"


def test_the_finder_answers_only_moved_names():
    finder = next(f for f in sys.meta_path if isinstance(f, _aliases.AliasFinder))
    assert finder.find_spec("tensorvm.framework.graph") is None
    assert finder.find_spec("numpy") is None
    assert finder.find_spec("tensorvm.session").name == "tensorvm.session"
    # importing through an alias leaves the module its own spec (reload, runpy, spawn read it)
    import tensorvm.runtime.session as session
    assert session.__spec__.name == "tensorvm.runtime.session"
