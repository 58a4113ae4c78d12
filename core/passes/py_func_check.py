"""Refusing, while planning, a ``py_func`` whose function cannot travel to its worker.

A py_func on a remote device is shipped with cloudpickle (when its plan is registered on the
workers); :func:`check_serialisable` names the op, its line and the innermost object at
fault instead of failing deep inside Dask.
"""
from __future__ import annotations

from ..framework.errors import InvalidArgumentError

_PY_FUNCS = ("PyFunc", "PyFuncStateless")


def check_serialisable(plan) -> None:
    """A py_func travels to its worker with cloudpickle: refuse, while planning, one whose
    function cannot be serialised, naming the op, its line and the object at fault."""
    import cloudpickle
    for t in plan.tasks:
        for ins in t.program.instrs:
            if ins.type not in _PY_FUNCS:
                continue
            try:
                cloudpickle.dumps(ins.attrs)
            except Exception as exc:  # noqa: BLE001 - whatever pickling raises, say where
                bad = _unpicklable_part(ins.attrs)
                raise InvalidArgumentError(
                    f"py_func op {ins.name!r} (created at {ins.location}) cannot be sent to "
                    f"device {t.device}: its function {ins.attrs.get('func')!r} refers to "
                    f"{type(bad).__name__} object {_short(bad)}, which cannot be serialised "
                    f"({type(exc).__name__}: {exc}); build that object inside the function, "
                    "or run the op in-process") from None


def _short(obj) -> str:
    try:
        r = repr(obj)
    except Exception:  # noqa: BLE001 - a repr that fails is no reason to hide the error
        r = object.__repr__(obj)
    return r if len(r) <= 80 else r[:77] + "..."


def _children(obj) -> list:
    import inspect
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if inspect.ismethod(obj):
        return [obj.__self__, obj.__func__]
    if inspect.isfunction(obj):
        out = [c.cell_contents for c in (obj.__closure__ or ())
               if c.cell_contents is not None]
        out += list(obj.__defaults__ or ()) + list((obj.__kwdefaults__ or {}).values())
        names = set(obj.__code__.co_names)
        out += [v for k, v in obj.__globals__.items() if k in names]
        return out
    if hasattr(obj, "__dict__"):
        return list(vars(obj).values())
    return []


def _unpicklable_part(obj, depth: int = 0):
    """The innermost object reachable from ``obj`` that cloudpickle cannot serialise."""
    import cloudpickle
    if depth < 6:
        for child in _children(obj):
            try:
                cloudpickle.dumps(child)
            except Exception:  # noqa: BLE001 - this one fails: look inside it
                return _unpicklable_part(child, depth + 1)
    return obj
