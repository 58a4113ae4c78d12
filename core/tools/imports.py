"""The import graph of the ``tensorvm`` package and its strongly connected components.

Two graphs: the imports that run when a module is imported (module level), which must have no
circle at all, and every import including the lazy ones inside functions (a lazy import still
ties two modules together). The package is meant to flow one way, as TensorFlow's framework
does: the only circle allowed among all imports is op families (``tensorvm.ops.*``) whose
gradient and helper functions call sibling families lazily. ``python -m tensorvm.tools.imports``
prints every component with more than one module; with ``--layers`` it prints the layer order
(:mod:`tensorvm.tools.layers`), every import that runs up it as ``importer -> imported
(file:line)``, and ``N upward imports``, exiting 1 when N > 0. An old module path
(``core/_aliases.py``) counts as the module it moved to. ``tests/test_imports.py`` checks both.

>>> comps = import_components()
>>> all(len(c) > 1 for c in comps)
True
"""
from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterable
from typing import NamedTuple

from . import layers

_PKG = "tensorvm"
_MAPPED_SUBPACKAGES = ("storage", "mapreduce", "scheduler_ext", "jobs")


def _package_modules() -> dict[str, str]:
    """module name -> source file, for every module of the installed/imported package."""
    import importlib

    out: dict[str, str] = {}
    todo = [(_PKG, importlib.import_module(_PKG))]
    # The layout maps these folders beside core/ into the package (pyproject's package-dir), so
    # they are not under tensorvm.__path__.
    for sub in _MAPPED_SUBPACKAGES:
        try:
            todo.append((f"{_PKG}.{sub}", importlib.import_module(f"{_PKG}.{sub}")))
        except ImportError:
            continue
    while todo:
        name, mod = todo.pop()
        for root in getattr(mod, "__path__", []):
            for entry in sorted(os.listdir(root)):
                path = os.path.join(root, entry)
                if entry.endswith(".py") and not entry.startswith("."):
                    sub = name if entry == "__init__.py" else f"{name}.{entry[:-3]}"
                    out[sub] = path
                elif os.path.isfile(os.path.join(path, "__init__.py")):
                    child = f"{name}.{entry}"
                    try:
                        todo.append((child, importlib.import_module(child)))
                    except ImportError:  # an optional extra (e.g. no GPU stack)
                        continue
    return out


def _resolve(module: str, is_pkg: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _package_module(name: str, modules: dict[str, str]) -> str | None:
    """The package module that importing ``name`` loads: its longest prefix that is a module,
    an old path (``core/_aliases.py``'s ``MOVED``) read as the module it moved to."""
    from .._aliases import MOVED

    while name:
        if name in modules:
            return name
        moved = MOVED.get(name[len(_PKG) + 1:]) if name.startswith(_PKG + ".") else None
        if moved and f"{_PKG}.{moved}" in modules:
            return f"{_PKG}.{moved}"
        name = name.rpartition(".")[0]
    return None


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (its body is read by type checkers and never runs)."""
    test = getattr(node, "test", None) if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.Module):
    """(import statement, whether it runs only when a function is called), for every import that
    can run."""
    todo = [(node, False) for node in tree.body]
    while todo:
        node, lazy = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, lazy
        inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        children = node.orelse if _type_checking(node) else ast.iter_child_nodes(node)
        todo.extend((child, inner) for child in children)


class ImportSite(NamedTuple):
    """One import of a package module by another: where it is, and whether it is lazy."""

    importer: str
    imported: str
    path: str
    line: int
    lazy: bool


def import_sites(modules: dict[str, str] | None = None) -> list[ImportSite]:
    """Every import of a package module by another, module-level and lazy ones, sorted by file
    and line; ``from . import x`` counts as an import of the module ``x`` where ``x`` is one."""
    modules = modules or _package_modules()
    sites: list[ImportSite] = []
    for mod, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        is_pkg = path.endswith("__init__.py")
        for node, lazy in _statements(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                base = _resolve(mod, is_pkg, node.level, node.module)
                names = [f"{base}.{a.name}" for a in node.names]
            for n in names:
                target = _package_module(n, modules)
                if target and target != mod:
                    sites.append(ImportSite(mod, target, path, node.lineno, lazy))
    return sorted(set(sites), key=lambda s: (s.path, s.line, s.imported))


def import_edges(modules: dict[str, str] | None = None,
                 module_level_only: bool = False) -> dict[str, set[str]]:
    """module -> the package modules it imports (anywhere in its code, or only at import time
    with ``module_level_only``)."""
    modules = modules or _package_modules()
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for site in import_sites(modules):
        if not (module_level_only and site.lazy):
            edges[site.importer].add(site.imported)
    return edges


def strongly_connected(edges: dict[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one node, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
    return sorted(comps)


def import_components(module_level_only: bool = False) -> list[list[str]]:
    """The import circles of the package (strongly connected components of > 1 module)."""
    return strongly_connected(import_edges(module_level_only=module_level_only))


def _print_layers() -> int:
    """The layer order, every import that runs up it, and their count; 1 when there is any."""
    out = sys.stdout
    out.write(f"layers, bottom first: {layers.layer_order()}\n")
    up = layers.upward_imports(import_sites())
    for s in up:
        where = f"{os.path.relpath(s.path)}:{s.line}"
        out.write(f"{s.importer} -> {s.imported} ({where}{', lazy' if s.lazy else ''})\n")
    out.write(f"{len(up)} upward imports\n")
    return 1 if up else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m tensorvm.tools.imports [--layers]``: the import circles, or with ``--layers``
    the layer check (exit status 1 when an import runs up the layers)."""
    args = sys.argv[1:] if argv is None else argv
    if "--layers" in args:
        return _print_layers()
    for title, only in (("at import time", True), ("counting lazy imports", False)):
        comps = import_components(module_level_only=only)
        sys.stdout.write(f"import circles {title}: {len(comps) or 'none'}\n")
        for c in comps:
            sys.stdout.write(f"  {len(c)} modules: {' '.join(c)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
