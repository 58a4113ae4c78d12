"""The package's import graph flows one way (issue 7): no circle at import time, and counting
lazy imports too, circles only among op families that call their siblings lazily; and no import
runs up the layers (issue 22: `python -m tensorvm.tools.imports --layers`)."""
import pytest

from tensorvm.tools import imports
from tensorvm.tools.imports import import_components, strongly_connected


@pytest.fixture(scope="module", autouse=True)
def _sources_parsed_once():
    """The package's sources are parsed once for this module's tests (each check walked the
    whole tree again); a test's own modules (a fake package) are parsed as given."""
    parse, seen = imports.import_sites, {}

    def import_sites(modules=None):
        key = tuple(sorted((modules or imports._package_modules()).items()))
        if key not in seen:
            seen[key] = parse(dict(key))
        return list(seen[key])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(imports, "import_sites", import_sites)
        yield


def test_no_import_circle_at_import_time():
    assert import_components(module_level_only=True) == []


def test_only_op_families_call_each_other_lazily():
    for comp in import_components():
        outside = [m for m in comp if not m.startswith("tensorvm.ops.")]
        assert not outside, f"import circle through {outside}: {comp}"


def test_the_graph_core_is_below_the_session():
    from tensorvm.tools.imports import import_edges
    edges = import_edges()
    for leaf in ("tensorvm.framework.op_registry", "tensorvm.framework.indexed_slices", "tensorvm.framework.errors",
                 "tensorvm.framework.dtypes"):
        assert not {m for m in edges[leaf]} - {"tensorvm.framework.errors", "tensorvm.framework.dtypes",
                                               "tensorvm.storage.errors"}, leaf
    reach, todo = set(), ["tensorvm.framework.graph"]
    while todo:
        for n in edges[todo.pop()]:
            if n not in reach:
                reach.add(n)
                todo.append(n)
    assert not reach & {"tensorvm.runtime.session", "tensorvm.framework.graph_def", "tensorvm.train",
                        "tensorvm.vm.interpreter"}, reach


def test_strongly_connected_finds_circles():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(edges) == [["a", "b", "c"]]


def test_no_import_runs_up_the_layers():
    """framework <- vm <- {ops, passes} <- runtime <- tf_api <- train <- estimator <- the façade
    <- {mapreduce, scheduler_ext} <- jobs, storage a leaf (issue 22): lazy imports count too."""
    from tensorvm.tools.imports import import_sites
    from tensorvm.tools.layers import upward_imports
    up = upward_imports(import_sites())
    assert not up, "\n".join(f"{s.importer} -> {s.imported} ({s.path}:{s.line})" for s in up)


def test_every_module_is_in_a_layer():
    from tensorvm.tools.imports import _package_modules
    from tensorvm.tools.layers import layer
    for module in _package_modules():
        layer(module)  # KeyError names one outside every layer


def test_siblings_and_leaves():
    from tensorvm.tools.layers import runs_up
    assert runs_up("tensorvm.passes.place", "tensorvm.ops.math.math_ops")
    assert runs_up("tensorvm.ops.control.while_loop", "tensorvm.passes")
    assert runs_up("tensorvm.storage.fsio", "tensorvm.framework.errors")
    assert runs_up("tensorvm.train.hooks", "tensorvm.scheduler_ext")
    assert runs_up("tensorvm.mapreduce.job", "tensorvm.scheduler_ext.registry")
    assert not runs_up("tensorvm.jobs.cli", "tensorvm.scheduler_ext")
    assert not runs_up("tensorvm.runtime.session", "tensorvm.passes.step")
    assert not runs_up("tensorvm.ops", "tensorvm._aliases")


def _fake_package(tmp_path, sources: dict[str, str]) -> dict[str, str]:
    modules = {}
    for name, text in sources.items():
        path = tmp_path / (name.replace(".", "_") + ".py")
        path.write_text(text)
        modules[name] = str(path)
    return modules


def test_lazy_aliased_and_relative_imports_are_found(tmp_path):
    from tensorvm.tools.imports import import_sites
    from tensorvm.tools.layers import upward_imports
    modules = _fake_package(tmp_path, {
        "tensorvm.framework.graph": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from tensorvm.train import saver\n"  # never runs: not an import
            "def f():\n"
            "    from tensorvm.session import Session\n"  # an old path (core/_aliases.py)
            "    from ..ops import math_ops\n"),  # relative, and an old path too
        "tensorvm.runtime.session": "",
        "tensorvm.ops.math.math_ops": "from ...framework import graph\n",
        "tensorvm.train.saver": "",
    })
    sites = import_sites(modules)
    assert {(s.importer, s.imported, s.line, s.lazy) for s in sites} == {
        ("tensorvm.framework.graph", "tensorvm.runtime.session", 5, True),
        ("tensorvm.framework.graph", "tensorvm.ops.math.math_ops", 6, True),
        ("tensorvm.ops.math.math_ops", "tensorvm.framework.graph", 1, False)}
    assert {s.imported for s in upward_imports(sites)} == {"tensorvm.runtime.session",
                                                            "tensorvm.ops.math.math_ops"}


def test_the_layers_command_fails_on_an_upward_import(monkeypatch, capsys):
    from tensorvm.tools import imports
    assert imports.main(["--layers"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("layers, bottom first: {storage, aliases} <- framework <- vm <- "
                             "{ops, passes} <- runtime <- tf_api <- train <- estimator")
    assert out[-1] == "0 upward imports"
    site = imports.ImportSite("tensorvm.vm.interpreter", "tensorvm.runtime.session",
                              "core/vm/interpreter.py", 7, True)
    monkeypatch.setattr(imports, "import_sites", lambda: [site])
    assert imports.main(["--layers"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == ["tensorvm.vm.interpreter -> tensorvm.runtime.session "
                        "(core/vm/interpreter.py:7, lazy)", "1 upward imports"]
