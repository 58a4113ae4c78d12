"""The package's import graph flows one way (issue 7): no circle at import time, and counting
lazy imports too, circles only among op families that call their siblings lazily."""
from tensorvm.tools.imports import import_components, strongly_connected


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
