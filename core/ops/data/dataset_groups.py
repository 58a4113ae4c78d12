"""``group_by_window``, ``bucket_by_sequence_length`` and ``group_by_reducer``
(``tf.data.experimental``): elements grouped by a key. ``group_by_window`` turns each full
group (and, at the end, each remaining group, in increasing key order, as TF's ``std::map``)
into a dataset by a traced function; ``group_by_reducer`` folds a state per key and gives one
output per key, in key order too.

Design
------
Three functions are traced once: ``key_func`` (element -> int64 scalar), ``window_size_func``
(key -> int64 scalar; or a constant ``window_size``) and ``reduce_func(key, window)`` whose
``window`` is ``Dataset.from_tensor_slices`` of placeholders the group's elements are fed to,
and which returns a dataset — compiled as the inner pipeline of ``flat_map`` is. A group's
elements of one shape are stacked into one array per component; elements of different shapes
(the sequences of ``bucket_by_sequence_length``) are handed over as
:class:`~tensorvm.ops.data.dataset_sources.Rows`, which the window's slices yield one by one.

>>> import tensorvm as tv
>>> ds = tv.data.Dataset.range(10).apply(tv.data.experimental.group_by_window(
...     lambda x: x % 2, lambda k, w: w.batch(5), window_size=5))
>>> nxt = ds.make_one_shot_iterator().get_next()
>>> with tv.Session() as s:
...     [s.run(nxt).tolist() for _ in range(2)]
[[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor, _user_location
from ...framework.tensor_conversion import convert_to_tensor
from . import dataset_pipeline as P
from ..control.control_flow_ops import pack_as
from .dataset_ops import Dataset, _scalar, _static_int
from .dataset_sources import Rows
from .dataset_sparse import refuse_sparse

__all__: list[str] = []  # reached through tv.data.experimental


def _int64_scalar(res, what: str) -> Tensor:
    from .dataset_transforms import own
    t = own(convert_to_tensor(res)) if not isinstance(res, (tuple, list, dict, Dataset)) \
        else res
    if not isinstance(t, Tensor) or t.dtype != _dt.int64 or t._shape not in (None, ()):
        kind = f"{t.dtype.name}" if isinstance(t, Tensor) else type(t).__name__
        shape = list(t._shape) if isinstance(t, Tensor) and t._shape is not None else None
        raise ValueError(f"`{what}` must return a single tf.int64 scalar tensor. Got "
                         f"type={kind} and shape={shape}")
    return t


class _GroupByWindow(Dataset):
    def __init__(self, child, key_func, reduce_func, window_size, window_size_func):
        from ..array.array_ops import placeholder
        from .dataset_transforms import _InnerBuilder, _trace
        from .dataset_windows import refuse_nested
        from ..control.while_loop import Func, FuncGraph
        refuse_nested(child, "group_by_window")
        refuse_sparse(child, "group_by_window")
        if (window_size is None) == (window_size_func is None):
            raise ValueError("Either the `window_size` argument or the `window_size_func` "
                             "argument must be specified.")
        where = _user_location()
        fg, phs, res = _trace(child, key_func, "group_by_window")
        with fg.as_default():
            key = _int64_scalar(res, "key_func")
        self._key = Func(fg, phs + list(fg.captures.values()), [key], "key_func", where)
        self._key_caps = list(fg.captures)
        self._size, self._size_func, self._size_caps = None, None, []
        if window_size_func is None:
            self._size = _scalar(window_size, _dt.int64, "window_size")
            n = _static_int(self._size)
            if n is not None and n <= 0:
                raise InvalidArgumentError(f"Window size must be greater than zero, but got "
                                           f"{n}.")
        else:
            sg = FuncGraph(child._graph, "Dataset.group_by_window.window_size_func")
            with sg.as_default():
                k = placeholder(_dt.int64, (), name="key")
                size = _int64_scalar(window_size_func(k), "window_size_func")
            self._size_func = Func(sg, [k] + list(sg.captures.values()), [size],
                                   "window_size_func", where)
            self._size_caps = list(sg.captures)
        rg = FuncGraph(child._graph, "Dataset.group_by_window.reduce_func")
        with rg.as_default():
            k = placeholder(_dt.int64, (), name="key")
            wphs = [placeholder(d, None if s is None else (None,) + tuple(s), name="window")
                    for d, s in zip(child._dtypes, child._shapes)]
            inner = reduce_func(k, Dataset.from_tensor_slices(pack_as(child._structure,
                                                                      wphs)))
        if not isinstance(inner, Dataset):
            raise TypeError(f"`reduce_func` must return a `Dataset` object. Got {type(inner)}")
        b = _InnerBuilder(rg)
        self._inner = inner._compile(b)
        self._reduce = Func(rg, [k] + wphs + list(rg.captures.values()), list(b.inputs),
                            "reduce_func", where)
        self._reduce_caps = list(rg.captures)
        self._child = child
        super().__init__(inner._structure, inner._dtypes, inner._shapes)

    def _compile(self, b):
        refs = lambda ts: tuple(b.ref(t) for t in ts)
        return GroupByWindow(self._child._compile(b), self._key, refs(self._key_caps),
                             None if self._size is None else b.ref(self._size),
                             self._size_func, refs(self._size_caps), self._reduce,
                             refs(self._reduce_caps), self._inner)


def _group_value(rows: list):
    """One component of a group: stacked when its elements share a shape, else Rows."""
    rows = [r if isinstance(r, np.ndarray) else
            np.asarray(r, dtype=object if isinstance(r, (str, bytes)) else None) for r in rows]
    if all(r.shape == rows[0].shape for r in rows):
        return P._stack([[r] for r in rows])[0]
    return Rows(rows)


@dataclass
class GroupByWindow(P.Stage):
    child: P.Stage
    key: Any  # Func: element + captures -> int64 key
    key_caps: tuple
    size: P.Ref | None
    size_func: Any  # Func or None: key + captures -> int64 window size
    size_caps: tuple
    reduce: Any  # Func: key + group components + captures -> the inner pipeline's inputs
    reduce_caps: tuple
    inner: P.Stage

    def _window_size(self, env, key, caps) -> int:
        if self.size_func is None:
            n = P._count(self.size.get(env), "window_size")
        else:
            n = int(np.asarray(P._host(self.size_func.call(env.ctx, [np.int64(key)] +
                                                            caps)[0])))
        if n <= 0:
            raise InvalidArgumentError(f"Window size must be greater than zero, but got {n}.")
        return n

    def _emit(self, env, key, elems, caps):
        comps = [_group_value([e[j] for e in elems]) for j in range(len(elems[0]))]
        vals = self.reduce.call(env.ctx, [np.int64(key)] + comps + caps)
        sub = P.Env([v if isinstance(v, Rows) else P._host(v) for v in vals], env.ctx)
        self.inner.check(sub)
        yield from P._follow(env, sub, self.inner.blocks(sub))

    def blocks(self, env):
        kc, sc, rc = ([r.get(env) for r in refs] for refs in
                      (self.key_caps, self.size_caps, self.reduce_caps))
        groups: dict = {}
        sizes: dict = {}
        for block in self.child.blocks(env):
            for i in range(len(block[0])):
                elem = [c[i] for c in block]
                key = int(np.asarray(P._host(self.key.call(env.ctx, elem + kc)[0])))
                if key not in sizes:
                    sizes[key] = self._window_size(env, key, sc)
                group = groups.setdefault(key, [])
                group.append(elem)
                if len(group) >= sizes[key]:
                    del groups[key]
                    yield from self._emit(env, key, group, rc)
        for key in sorted(groups):  # TF flushes what is left in key order
            yield from self._emit(env, key, groups[key], rc)


def group_by_window(key_func, reduce_func, window_size=None, window_size_func=None):
    """``dataset.apply(group_by_window(...))``: see the module docstring."""
    return lambda ds: _GroupByWindow(ds, key_func, reduce_func, window_size,
                                     window_size_func)


def bucket_by_sequence_length(element_length_func, bucket_boundaries, bucket_batch_sizes,
                              padded_shapes=None, padding_values=None,
                              pad_to_bucket_boundary=False, no_padding=False,
                              drop_remainder=False):
    """Elements batched with others of similar length (TF 1.x's
    ``tf.data.experimental.bucket_by_sequence_length``): bucket ``i`` holds the lengths in
    ``[boundaries[i-1], boundaries[i])`` and is padded-batched ``bucket_batch_sizes[i]`` at
    a time (plain ``batch`` with ``no_padding``; with ``pad_to_bucket_boundary`` the unknown
    dimensions are padded to the bucket's boundary minus one)."""
    from ..array.index_ops import gather
    from ..math.math_ext import logical_and, reduce_min, where
    from ..math.math_ops import cast
    boundaries = [int(b) for b in bucket_boundaries]
    sizes = [int(b) for b in bucket_batch_sizes]
    if len(sizes) != len(boundaries) + 1:
        raise ValueError("len(bucket_batch_sizes) must equal len(bucket_boundaries) + 1")
    if boundaries != sorted(boundaries):
        raise ValueError("bucket_boundaries must be sorted")
    lo = np.array([np.iinfo(np.int32).min] + boundaries, np.int64)
    hi = np.array(boundaries + [np.iinfo(np.int32).max], np.int64)

    def key_fn(*elem):
        elem = elem[0] if len(elem) == 1 else elem
        n = convert_to_tensor(element_length_func(elem) if not isinstance(elem, tuple)
                              else element_length_func(*elem))
        n = cast(n, _dt.int64)
        inside = logical_and(convert_to_tensor(lo) <= n, n < convert_to_tensor(hi))
        return reduce_min(where(inside))

    def size_fn(key):
        return gather(convert_to_tensor(np.array(sizes, np.int64)), key)

    def batch_fn(key, window):
        size = size_fn(key)
        if no_padding:
            return window.batch(size, drop_remainder=drop_remainder)
        shapes = padded_shapes if padded_shapes is not None else window.output_shapes
        if pad_to_bucket_boundary:
            shapes = _fill_unknown(shapes, _boundary_fill(key, boundaries))
        return window.padded_batch(size, shapes, padding_values, drop_remainder)
    return group_by_window(key_fn, batch_fn, window_size_func=size_fn)


def _boundary_fill(key, boundaries):
    """The bucket's boundary minus one (TF's ``none_filler``), failing the step for the last,
    unbounded bucket with TF's message."""
    from ...framework.graph import get_default_graph
    from ..array.array_ops import identity
    from ..control.control_flow_ops import Assert
    from ..array.index_ops import gather
    check = Assert(key < len(boundaries), [("When pad_to_bucket_boundary=True, elements must "
                                           "have length < max(bucket_boundaries).")])
    with get_default_graph().control_dependencies([check]):
        return identity(gather(convert_to_tensor(np.array(boundaries, np.int64)),
                               key)) - 1


def _fill_unknown(shapes, fill):
    from .dataset_ops import _as_shape
    if isinstance(shapes, dict):
        return {k: _fill_unknown(v, fill) for k, v in shapes.items()}
    if isinstance(shapes, (tuple, list)) and not all(
            d is None or isinstance(d, int) for d in shapes):
        return type(shapes)(_fill_unknown(s, fill) for s in shapes)
    return [fill if d is None else d for d in _as_shape(shapes).dims]


# ---- group_by_reducer --------------------------------------------------------------------------

class Reducer:
    """``tf.data.experimental.Reducer``: ``init_func(key)`` makes a group's state,
    ``reduce_func(state, element)`` folds an element into it, ``finalize_func(state)`` (the
    state's parts as arguments when it is a tuple) makes the group's output."""

    def __init__(self, init_func, reduce_func, finalize_func):
        self.init_func, self.reduce_func = init_func, reduce_func
        self.finalize_func = finalize_func


class _GroupByReducer(Dataset):
    def __init__(self, child, key_func, reducer):
        from ..array.array_ops import placeholder
        from ..control.control_flow_ops import flatten
        from .dataset_ops import _shape_of
        from .dataset_transforms import _result, _trace
        from .dataset_windows import refuse_nested, trace_with_state
        from ..control.while_loop import Func, FuncGraph
        refuse_nested(child, "group_by_reducer")
        refuse_sparse(child, "group_by_reducer")
        if not isinstance(reducer, Reducer):
            raise TypeError(f"group_by_reducer: `reducer` must be a "
                            f"tf.data.experimental.Reducer, got {reducer!r}")
        where = _user_location()
        fg, phs, res = _trace(child, key_func, "group_by_reducer")
        with fg.as_default():
            key = _int64_scalar(res, "key_func")
        self._key = Func(fg, phs + list(fg.captures.values()), [key], "key_func", where)
        self._key_caps = list(fg.captures)
        ig = FuncGraph(child._graph, "Dataset.group_by_reducer.init_func")
        with ig.as_default():
            k = placeholder(_dt.int64, (), name="key")
            state = _result(reducer.init_func(k), "group_by_reducer")
        init = flatten(state)
        self._init = Func(ig, [k] + list(ig.captures.values()), init, "init_func", where)
        self._init_caps = list(ig.captures)
        func, caps, _, state, shapes, _ = trace_with_state(child, reducer.reduce_func, state,
                                                           "group_by_reducer", pair=False)
        self._reduce, self._reduce_caps = func, caps
        zg = FuncGraph(child._graph, "Dataset.group_by_reducer.finalize_func")
        with zg.as_default():
            s_phs = [placeholder(t.dtype, s, name="state") for t, s in zip(init, shapes)]
            packed = pack_as(state, s_phs)
            out = _result(reducer.finalize_func(*packed) if type(packed) is tuple
                          else reducer.finalize_func(packed), "group_by_reducer")
        flat = flatten(out)
        self._final = Func(zg, s_phs + list(zg.captures.values()), flat, "finalize_func",
                           where)
        self._final_caps = list(zg.captures)
        self._state_dtypes = tuple(t.dtype for t in init)
        self._child = child
        super().__init__(out, [t.dtype for t in flat], [_shape_of(t) for t in flat])

    def _compile(self, b):
        from .dataset_windows import _np_dtypes
        refs = lambda ts: tuple(b.ref(t) for t in ts)
        return GroupByReducer(self._child._compile(b), self._key, refs(self._key_caps),
                              self._init, refs(self._init_caps), self._reduce,
                              refs(self._reduce_caps), self._final, refs(self._final_caps),
                              _np_dtypes(self._state_dtypes), _np_dtypes(self._dtypes))


@dataclass
class GroupByReducer(P.Stage):
    """Each key's state folded over its elements; at the end, each key's finalized state,
    in increasing key order (as TF)."""
    child: P.Stage
    key: Any
    key_caps: tuple
    init: Any
    init_caps: tuple
    reduce: Any
    reduce_caps: tuple
    final: Any
    final_caps: tuple
    state_dtypes: tuple
    dtypes: tuple

    def _call(self, env, func, args, dtypes):
        return [P.as_component(P._host(v), d) for v, d in zip(func.call(env.ctx, args),
                                                               dtypes)]

    def blocks(self, env):
        from .dataset_windows import _stack_runs
        kc, ic, rc, fc = ([r.get(env) for r in refs] for refs in (
            self.key_caps, self.init_caps, self.reduce_caps, self.final_caps))
        states: dict = {}
        for block in self.child.blocks(env):
            for i in range(len(block[0])):
                elem = [c[i] for c in block]
                key = int(np.asarray(P._host(self.key.call(env.ctx, elem + kc)[0])))
                state = states.get(key)
                if state is None:
                    state = self._call(env, self.init, [np.int64(key)] + ic,
                                       self.state_dtypes)
                states[key] = self._call(env, self.reduce, state + elem + rc,
                                         self.state_dtypes)
        yield from _stack_runs(self._call(env, self.final, states[k] + fc, self.dtypes)
                               for k in sorted(states))


def group_by_reducer(key_func, reducer):
    """``dataset.apply(group_by_reducer(key_func, reducer))``: one output per key."""
    return lambda ds: _GroupByReducer(ds, key_func, reducer)
