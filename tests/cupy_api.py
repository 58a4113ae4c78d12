"""CuPy's API surface, as data, so the fake device (``tests/fake_device.py``) refuses what a real
GPU would refuse even on machines without CuPy.

A one-source kernel runs ``np.f(x)`` on CuPy arrays through NumPy's dispatch: CuPy's
``__array_function__`` looks ``f`` up by its NumPy module path in ``cupy`` and gives up
(``TypeError: no implementation found``) when CuPy has no such function; its
``__array_ufunc__`` runs the CuPy ufunc of the same name, whose ``reduce``/``accumulate`` exist
for ``add`` and ``multiply`` only, ``reduceat`` for ``add`` only, ``at`` for the ufuncs with a
scatter kernel, and whose calls take ``out``, ``dtype`` and ``casting`` only (no ``where``).
Methods of ``cupy.ndarray`` are a subset of NumPy's. None of that shows on a host fake unless
the fake knows CuPy's surface: this module records it in ``tests/data/cupy_api.json``.

Regenerate it in an environment with CuPy installed (it imports without a GPU)::

    python -m venv /tmp/cupyvenv && /tmp/cupyvenv/bin/pip install numpy cupy-cuda12x
    /tmp/cupyvenv/bin/python tests/cupy_api.py tests/data/cupy_api.json

The file holds, per module (``""`` is ``cupy`` itself, then ``linalg``, ``fft``, ``random``,
``lib.stride_tricks``), each public name with its parameter names (``null`` where CuPy takes
``*args``/``**kwargs`` or the signature is unknown); NumPy's ufuncs that CuPy has, with the
methods CuPy supports for each (``gufuncs``: those CuPy implements as generalised ufuncs, such
as ``matmul``, whose calls take keywords of their own); and ``cupy.ndarray``'s attributes with their parameter names.
"""
from __future__ import annotations

import ast
import functools
import inspect
import json
import os
import re
import sys

PATH = os.path.join(os.path.dirname(__file__), "data", "cupy_api.json")
MODULES = ("", "linalg", "fft", "random", "lib.stride_tricks")

# What CuPy's ufunc methods accept (cupy/_core/_kernel.pyx: ``ufunc.__call__`` pops out, dtype,
# casting and raises on anything else; reduce(array, axis, dtype, out, keepdims), ...).
UFUNC_KWARGS = {
    "__call__": ("out", "dtype", "casting"),
    "outer": ("out", "dtype", "casting"),
    "reduce": ("axis", "dtype", "out", "keepdims"),
    "accumulate": ("axis", "dtype", "out"),
    "reduceat": ("axis", "dtype", "out"),
    "at": (),
}


@functools.lru_cache(maxsize=None)
def load() -> dict:
    """The recorded API (``tests/data/cupy_api.json``)."""
    with open(PATH) as f:
        return json.load(f)


# ---- generation (needs CuPy) -----------------------------------------------------------------
_DOC_SIG = re.compile(r"^[\w.]+\((.*)\)(\s*->.*)?$")


def _params(fn):
    """Parameter names of ``fn``, or None when it takes ``*args``/``**kwargs`` or has no
    readable signature (Cython methods carry theirs on the docstring's first line)."""
    try:
        sig = inspect.signature(fn)
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()):
            return None
        return [n for n in sig.parameters if n != "self"]
    except (TypeError, ValueError):
        pass
    first = (getattr(fn, "__doc__", None) or "").strip().split("\n", 1)[0]
    m = _DOC_SIG.match(first)
    if not m:
        return None
    try:
        args = ast.parse(f"def f({m.group(1)}): pass").body[0].args
    except SyntaxError:
        return None
    if args.vararg or args.kwarg:
        return None
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg != "self"]


def generate() -> dict:
    """Read CuPy's API from the installed CuPy."""
    import cupy
    api = {"cupy_version": cupy.__version__, "modules": {}, "ufuncs": {}, "gufuncs": {},
           "ndarray": {}}
    for path in MODULES:
        mod = functools.reduce(getattr, path.split(".") if path else [], cupy)
        names = {}
        for name in dir(mod):
            if name.startswith("_"):
                continue
            obj = getattr(mod, name)
            if isinstance(obj, cupy.ufunc) or isinstance(obj, type) or not callable(obj):
                names[name] = None
            else:
                names[name] = _params(obj)
        api["modules"][path] = names
    import numpy
    for name in dir(numpy):
        if not isinstance(getattr(numpy, name), numpy.ufunc) or not hasattr(cupy, name):
            continue
        u = getattr(cupy, name)
        if not isinstance(u, cupy.ufunc):  # matmul, a generalised ufunc: calls of its own
            api["gufuncs"][name] = [m for m in UFUNC_KWARGS if m == "__call__" or hasattr(u, m)]
            continue
        methods = ["__call__", "outer"]
        if name in ("add", "multiply"):
            methods += ["reduce", "accumulate"]
        if name == "add":
            methods.append("reduceat")
        if getattr(u, "_scatter_op", None) is not None:
            methods.append("at")
        api["ufuncs"][name] = methods
    for name in dir(cupy.ndarray):
        if name.startswith("__") and name.endswith("__"):
            continue
        obj = getattr(cupy.ndarray, name)
        api["ndarray"][name] = _params(obj) if callable(obj) else None
    return api


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else PATH
    with open(out, "w") as f:
        json.dump(generate(), f, indent=0, sort_keys=True)
        f.write("\n")
