"""``window``, ``scan``, ``take_while``, ``ignore_errors`` and ``unique`` of ``tv.data``: the
graph side (each a :class:`~tensorvm.ops.data.dataset_ops.Dataset`) and its pipeline stage.

Design
------
``window(size, shift, stride, drop_remainder)`` makes a dataset whose elements are datasets
(TF's nested ``DatasetSpec``): its blocks hold, per component, an object array of windows,
each a NumPy array of that window's rows, gathered by one fancy index per block (a ``(k,
size)`` index matrix), never element by element. Such a dataset is *nested*: it is read by
``flat_map``/``interleave`` (or ``map``/``filter``) whose function receives, for each window,
``Dataset.from_tensor_slices`` of a placeholder the window's rows are fed to, so
``.flat_map(lambda w: w.batch(n))`` is an ordinary traced function. Batching, iterating or
reducing a nested dataset directly is refused, as TF refuses it.

``scan`` (``tf.data.experimental.scan``) and ``Dataset.reduce`` trace their function once on
placeholders of the state and the element; when the new state's static shape is less known
than the initial one (a growing vector), the state's shape is relaxed and the function traced
again, until it is stable (TF's rule). The state is reset at each initialisation and each
epoch of a ``repeat`` (the stage starts over).

>>> import tensorvm as tv
>>> ds = tv.data.Dataset.range(7).window(3, shift=2).flat_map(lambda w: w.batch(3))
>>> nxt = ds.make_one_shot_iterator().get_next()
>>> with tv.Session() as s:
...     [s.run(nxt).tolist() for _ in range(4)]
[[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError, OpError
from ...framework.graph import _user_location
from ...framework.sparse_tensor import SparseTensor
from . import dataset_pipeline as P
from ..control.control_flow_ops import flatten, pack_as, structure
from .dataset_ops import Dataset, _normalize, _scalar, _shape_of, _static_int
from .dataset_sparse import refuse_sparse

__all__: list[str] = []  # reached through tv.data.Dataset and tv.data.experimental


def refuse_nested(ds: Dataset, what: str) -> None:
    """A ``TypeError`` when ``ds``'s elements are datasets (made by ``window``)."""
    if ds._nested:
        raise TypeError(f"{what}: the elements of this dataset are datasets (made by "
                        "window()); read each window with flat_map or interleave, e.g. "
                        ".flat_map(lambda w: w.batch(size))")


def _np_dtypes(dtypes) -> tuple:
    return tuple(np.dtype(object) if d.is_string else d.np_dtype for d in dtypes)


def _tf_dtype(d) -> str:
    return f"<dtype: '{d.name}'>"


# ---- window ------------------------------------------------------------------------------------

class _Window(Dataset):
    def __init__(self, child, size, shift, stride, drop_remainder):
        refuse_nested(child, "window")
        refuse_sparse(child, "window")
        self._child = child
        self._size = _scalar(size, _dt.int64, "size")
        self._shift = _scalar(size if shift is None else shift, _dt.int64, "shift")
        self._stride = _scalar(stride, _dt.int64, "stride")
        for what, v in (("size", self._size), ("shift", self._shift),
                        ("stride", self._stride)):
            n = _static_int(v)
            if n is not None and n <= 0:
                raise InvalidArgumentError(f"Window {what} must be greater than zero.")
        self._drop = bool(drop_remainder)
        super().__init__(child._structure, child._dtypes, child._shapes)
        self._nested = True

    @property
    def output_classes(self):
        return pack_as(self._structure, [Dataset] * len(self._dtypes))

    def _compile(self, b):
        return Window(self._child._compile(b), b.ref(self._size), b.ref(self._shift),
                      b.ref(self._stride), self._drop)


def _window_params(stage, env):
    out = []
    for what, ref in (("size", stage.size), ("shift", stage.shift), ("stride", stage.stride)):
        n = P._count(ref.get(env), "window " + what)
        if n <= 0:
            raise InvalidArgumentError(f"Window {what} must be greater than zero.")
        out.append(n)
    return out


def _as_windows(rows: np.ndarray) -> np.ndarray:
    """``(m, k, ...)`` rows as an object array of ``m`` windows (views, not copies)."""
    out = np.empty(len(rows), dtype=object)
    for j in range(len(rows)):
        out[j] = rows[j]
    return out


@dataclass
class Window(P.Stage):
    """Windows of ``size`` elements starting every ``shift`` elements, ``stride`` apart; the
    last ones are shorter unless ``drop_remainder``."""
    child: P.Stage
    size: P.Ref
    shift: P.Ref
    stride: P.Ref
    drop_remainder: bool

    def check(self, env):
        _window_params(self, env)
        super().check(env)

    def blocks(self, env):
        size, shift, stride = _window_params(self, env)
        span = (size - 1) * stride + 1
        offsets = stride * np.arange(size)
        buf, base, start = None, 0, 0  # base: the input index of buf's first row
        for block in self.child.blocks(env):
            buf = block if buf is None else P._concat([buf, block])
            have = base + len(buf[0])
            if start + span <= have:  # every full window that ends in the buffer, at once
                m = (have - span - start) // shift + 1
                idx = (start - base + shift * np.arange(m))[:, None] + offsets
                yield tuple(_as_windows(c[idx]) for c in buf)
                start += m * shift
            cut = min(start - base, len(buf[0]))
            if cut > 0:
                buf, base = P._rows(buf, cut, None), base + cut
        if buf is None or self.drop_remainder:
            return
        have = base + len(buf[0])
        while start < have:  # the shorter windows at the end
            idx = np.arange(start - base, have - base, stride)[:size]
            yield tuple(_as_windows(c[idx][None]) for c in buf)
            start += shift


# ---- scan and reduce: functions of (state, element) ----------------------------------------

def _relaxed(a, b):
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def trace_with_state(ds: Dataset, fn, initial_state, what: str, pair: bool):
    """Trace ``fn(state, element)`` (``pair``: it returns ``(new_state, output)``), relaxing
    the state's static shapes until the new state fits them. Returns ``(func, captures,
    state tensors, state structure, state shapes, outputs)`` where ``outputs`` is the
    output structure of tensors (``pair``) or None."""
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.array_ops import placeholder
    from .dataset_sparse import SparseArgs, placeholders
    from .dataset_transforms import _expand, _result
    from ..control.while_loop import Func, FuncGraph
    if not callable(fn):
        raise TypeError(f"{what}: the function must be callable, got {fn!r}")
    state = _normalize(initial_state, convert_to_tensor)
    init = flatten(state)
    dtypes = [t.dtype for t in init]
    shapes = [_shape_of(t) for t in init]
    label = "scan_func" if pair else "reduce_func"
    prefix = f"Invalid `{label}`. " if pair else ""
    for _ in range(16):
        fg = FuncGraph(ds._graph, f"Dataset.{what}")
        with fg.as_default():
            s_phs = [placeholder(d, s, name="state") for d, s in zip(dtypes, shapes)]
            e_phs, leaves = [], []  # a sparse component: a SparseTensor of 3 placeholders
            for d, s, sp in zip(ds._dtypes, ds._shapes, ds._sparse):
                t, parts = placeholders(d, s) if sp else (None, [placeholder(d, s, name="arg")])
                e_phs.extend(parts)
                leaves.append(parts[0] if t is None else t)
            res = fn(pack_as(state, s_phs), pack_as(ds._structure, leaves))
            if pair:
                if not isinstance(res, (tuple, list)) or len(res) != 2:
                    raise TypeError(
                        f"Invalid `scan_func`. `scan_func` should return a pair consisting of "
                        f"new state and the output value but its return type is {res!r}.")
                new_state, out = _result(res[0], what), _result(res[1], what)
            else:
                new_state, out = _result(res, what), None
        if structure(new_state) != structure(state):
            raise TypeError(f"{prefix}The structure of the new state must match the initial "
                            f"state. Expected {structure(state)}, got "
                            f"{structure(new_state)}.")
        flat_new = flatten(new_state)
        if any(isinstance(t, SparseTensor) for t in flat_new):
            raise TypeError(f"{what}: a SparseTensor in the state is not supported in "
                            "tensorvm (elements and outputs may be SparseTensors)")
        for d, t in zip(dtypes, flat_new):
            if t.dtype != d:
                sep = ", got" if pair else " but got"
                raise TypeError(f"{prefix}The element types for the new state must match the "
                                f"initial state. Expected {_tf_dtype(d)}{sep} "
                                f"{_tf_dtype(t.dtype)}.")
        relaxed = [_relaxed(s, _shape_of(t)) for s, t in zip(shapes, flat_new)]
        if relaxed == shapes:
            break
        shapes = relaxed
    outs = [] if out is None else flatten(out)
    func = Func(fg, s_phs + e_phs + list(fg.captures.values()), flat_new + _expand(outs),
                f"Dataset.{what}", _user_location())
    out_sparse = [isinstance(t, SparseTensor) for t in outs]
    if any(ds._sparse) or any(out_sparse):
        n = len(flat_new)
        func = SparseArgs(func, (False,) * n + tuple(ds._sparse), (False,) * n +
                          tuple(out_sparse), (None,) * n + _np_dtypes(t.dtype for t in outs))
    return func, list(fg.captures), init, state, shapes, out


class _Scan(Dataset):
    def __init__(self, child, initial_state, scan_func):
        refuse_nested(child, "scan")
        func, caps, init, _, _, out = trace_with_state(child, scan_func, initial_state,
                                                       "scan", pair=True)
        flat = flatten(out)
        self._child, self._func, self._captures, self._init = child, func, caps, init
        super().__init__(out, [t.dtype for t in flat], [_shape_of(t) for t in flat])

    def _compile(self, b):
        return Scan(self._child._compile(b), self._func,
                    tuple(b.ref(t) for t in self._captures),
                    tuple(b.ref(t) for t in self._init),
                    _np_dtypes(t.dtype for t in self._init),
                    tuple(np.dtype(object) if sp else d
                          for d, sp in zip(_np_dtypes(self._dtypes), self._sparse)))


def _stack_runs(outs):
    """Per-element outputs (lists of arrays) as blocks: one per run of equal shapes."""
    run, shape = [], None
    for out in outs:
        s = tuple(o.shape for o in out)
        if run and s != shape:
            yield P._stack(run)
            run = []
        run.append(out)
        shape = s
    if run:
        yield P._stack(run)


@dataclass
class Scan(P.Stage):
    """``scan``: each element's output of ``func(state, element)``, the state carried on."""
    child: P.Stage
    func: Any
    captures: tuple
    init: tuple  # Refs of the initial state
    state_dtypes: tuple
    dtypes: tuple

    def blocks(self, env):
        caps = [r.get(env) for r in self.captures]
        state = [P.as_component(r.get(env), d) for r, d in zip(self.init, self.state_dtypes)]
        n = len(state)
        for block in self.child.blocks(env):
            outs = []
            for i in range(len(block[0])):
                res = self.func.call(env.ctx, state + [c[i] for c in block] + caps)
                res = [P.as_component(P._host(v), d)
                       for v, d in zip(res, self.state_dtypes + self.dtypes)]
                state, out = res[:n], res[n:]
                outs.append(out)
            yield from _stack_runs(outs)


def fold(stage: P.Stage, env: P.Env, func, state: list, caps: list, dtypes) -> list:
    """``Dataset.reduce``: ``func(state, element)`` over every element of ``stage``."""
    ctx = env.ctx
    stage.check(env)
    for block in stage.blocks(env):
        for i in range(len(block[0])):
            env.ctx = ctx
            res = func.call(ctx, state + [c[i] for c in block] + caps)
            state = [P.as_component(P._host(v), d) for v, d in zip(res, dtypes)]
    return state


# ---- take_while, ignore_errors, unique -------------------------------------------------------

class _TakeWhile(Dataset):
    def __init__(self, child, predicate):
        from .dataset_transforms import _Filter
        f = _Filter(child, predicate, "take_while")
        self._child, self._func, self._captures = child, f._func, f._captures
        super().__init__(child._structure, child._dtypes, child._shapes)
        self._nested = child._nested

    def _compile(self, b):
        return TakeWhile(self._child._compile(b), self._func,
                         tuple(b.ref(t) for t in self._captures))


@dataclass
class TakeWhile(P.Stage):
    """The elements before the first for which the predicate is false."""
    child: P.Stage
    func: Any
    captures: tuple

    def blocks(self, env):
        caps = [r.get(env) for r in self.captures]
        for block in self.child.blocks(env):
            for i in range(len(block[0])):
                args = [c[i] for c in block] + caps
                if not bool(np.asarray(P._host(self.func.call(env.ctx, args)[0]))):
                    if i:
                        yield P._rows(block, 0, i)
                    return
            yield block


class _IgnoreErrors(Dataset):
    def __init__(self, child):
        self._child = child
        super().__init__(child._structure, child._dtypes, child._shapes)
        self._nested = child._nested

    def _compile(self, b):
        return IgnoreErrors(self._child._compile(b))


@dataclass
class IgnoreErrors(P.Stage):
    """``ignore_errors``: an element whose ``map``/``filter`` function (or a generator's
    conversion) fails is dropped; an error that ends an input (a generator that raised, a
    corrupt file) ends it here, silently (TF: the input is then at its end)."""
    child: P.Stage

    def blocks(self, env):
        import logging
        gen = self.child.blocks(env)
        while True:
            env.skip_errors += 1
            try:
                block = next(gen)
            except StopIteration:
                return
            except OpError as e:
                logging.getLogger("tensorvm").debug("ignore_errors: input ended by %s", e)
                return
            finally:
                env.skip_errors -= 1
            yield block


class _Unique(Dataset):
    def __init__(self, child):
        refuse_nested(child, "unique")
        refuse_sparse(child, "unique")
        if len(child._dtypes) != 1 or child._dtypes[0] not in (_dt.int32, _dt.int64,
                                                               _dt.string):
            d = child._dtypes[0] if len(child._dtypes) == 1 else child.output_types
            raise TypeError(f"`tf.data.Dataset.unique` does not support type {d} -- only "
                            "`tf.int32`, `tf.int64`, and `tf.string` are supported.")
        if child._shapes[0] not in ((), None):
            raise TypeError("`tf.data.Dataset.unique` only supports scalar elements, got "
                            f"shape {list(child._shapes[0])}")
        self._child = child
        super().__init__(child._structure, child._dtypes, child._shapes)

    def _compile(self, b):
        return Unique(self._child._compile(b))


@dataclass
class Unique(P.Stage):
    """Each element once, at its first occurrence."""
    child: P.Stage

    def blocks(self, env):
        seen: set = set()
        for (c,) in self.child.blocks(env):
            if c.ndim != 1:
                raise InvalidArgumentError("unique: elements must be scalars, got shape "
                                           f"{list(c.shape[1:])}")
            if c.dtype.kind == "O":
                first = {}
                for j, v in enumerate(c.tolist()):
                    first.setdefault(v, j)
                idx = np.fromiter(first.values(), np.int64, len(first))
            else:
                _, idx = np.unique(c, return_index=True)
                idx.sort()
            keep = [j for j, v in zip(idx.tolist(), c[idx].tolist()) if v not in seen]
            if keep:
                vals = c[keep]
                seen.update(vals.tolist())
                yield (vals,)
