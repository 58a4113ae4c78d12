"""What runs inside an iterator: a ``tv.data`` pipeline as a stream of *blocks* of elements.

Design
------
A dataset's graph side (:mod:`tensorvm.ops.data.dataset_ops`) compiles to a tree of the small
:class:`Stage` objects below: plain data (their parameters, the traced functions of ``map`` and
``filter``, references to the iterator op's inputs), shipped with the iterator's ops. The
iterator resource (:mod:`tensorvm.ops.data.iterator_ops`) calls the root's :meth:`Stage.blocks` once
per initialisation and pulls elements from the generator it returns.

A *block* is a tuple of NumPy arrays, one per flattened component, all with the same leading
dimension ``k >= 1``: ``k`` consecutive elements of one shape. Sources cut their arrays into
blocks of at most :data:`CHUNK` rows without copying (``from_tensor_slices`` of a ``(N, d)``
array yields row-slices of it), and ``batch(n)`` turns ``k*n`` rows into one ``(k, n, d)``
block by a reshape, so a sliced-and-batched array never loops over records in Python; only
``map``/``filter`` (one call of the traced function per element, as in TF) and the index
bookkeeping of ``shuffle`` are per element.

Per-initialisation state (the shuffle generators, the ``cache`` contents, the kernel context
the traced functions run with) lives in an :class:`Env`, so ``repeat`` re-runs its input's
stages with the same generators (each epoch reshuffled) and a re-initialised iterator starts
over from its seeds.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ...framework.errors import InvalidArgumentError, OpError

CHUNK = 1 << 16  # rows per source block


@dataclass(frozen=True, eq=False)
class Ref:
    """A parameter of a stage: a value known when the graph was built (``const``) or the
    ``index``-th input of the op that initialises the iterator."""
    index: int = -1
    const: Any = None

    def get(self, env: Env):
        return self.const if self.index < 0 else env.inputs[self.index]


@dataclass
class Env:
    """One initialisation's state: the op's input values, the context the traced functions
    run with (renewed each step), the stages' generators and caches."""
    inputs: list
    ctx: Any = None
    rngs: dict = field(default_factory=dict)
    caches: dict = field(default_factory=dict)
    skip_errors: int = 0  # > 0 while an ``ignore_errors`` stage pulls from its input


def _obj(a) -> np.ndarray:
    return np.asarray(a, dtype=object)


def as_component(v, dtype: np.dtype) -> np.ndarray:
    """A kernel's value as a NumPy array of the component's dtype."""
    if dtype.kind == "O":
        return _obj(v)
    a = np.asarray(v)
    return a if a.dtype == dtype else a.astype(dtype)


def _rows(block, lo, hi):
    return tuple(c[lo:hi] for c in block)


def _concat(blocks: list) -> tuple:
    if len(blocks) == 1:
        return blocks[0]
    out = []
    for i in range(len(blocks[0])):
        parts = [b[i] for b in blocks]
        first = parts[0].shape[1:]
        for p in parts[1:]:
            if p.shape[1:] != first:
                raise InvalidArgumentError(
                    "Cannot add tensor to the batch: number of elements does not match. "
                    f"Shapes are: [tensor]: {list(p.shape[1:])}, [batch]: {list(first)}")
        out.append(np.concatenate(parts))
    return tuple(out)


def _count(v, what: str) -> int:
    a = np.asarray(v)
    if a.ndim or a.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{what} must be an integer scalar, got {a!r}")
    return int(a)


class Stage:
    """One dataset in the compiled pipeline; :meth:`blocks` yields its blocks, and
    :meth:`check` validates its parameters when the iterator is initialised (as TF's dataset
    ops do), before any element is made."""

    def blocks(self, env: Env) -> Iterator[tuple]:
        raise TypeError(f"{type(self).__name__} is not a dataset stage")  # pragma: no cover

    def check(self, env: Env) -> None:
        for f in fields(self):
            if f.name == "inner":  # a per-element pipeline: checked with its own Env
                continue
            v = getattr(self, f.name)
            for s in (v if isinstance(v, tuple) else (v,)):
                if isinstance(s, Stage):
                    s.check(env)


# ---- element-wise functions ------------------------------------------------------------------

@dataclass
class Map(Stage):
    child: Stage
    func: Any  # while_loop.Func: element components + captures -> outputs
    captures: tuple  # Refs
    dtypes: tuple  # output numpy dtypes

    def blocks(self, env):
        caps = [r.get(env) for r in self.captures]
        for block in self.child.blocks(env):
            run: list = []
            shape = None
            for i in range(len(block[0])):
                try:
                    out = self.func.call(env.ctx, [c[i] for c in block] + caps)
                except OpError:
                    if env.skip_errors:
                        continue  # ignore_errors: the element is dropped
                    raise
                out = [as_component(_host(v), d) for v, d in zip(out, self.dtypes)]
                s = tuple(o.shape for o in out)
                if run and s != shape:
                    yield _stack(run)
                    run = []
                run.append(out)
                shape = s
            if run:
                yield _stack(run)


_to_host = None


def _host(v):
    """A kernel's value on the host (a device array copied; NumPy values as they are)."""
    global _to_host
    if type(v) is np.ndarray:
        return v
    if _to_host is None:
        from ...vm.kernels.array_api import to_host
        _to_host = to_host
    return _to_host(v)


def _stack(elems: list) -> tuple:
    return tuple(_stack_objects(c) if c[0].dtype.kind == "O" else np.stack(c)
                 for c in zip(*elems))


def _stack_objects(comps) -> np.ndarray:
    """Object (string) arrays of one shape stacked; a 0-d one gives its element, not itself."""
    out = np.empty((len(comps),) + comps[0].shape, dtype=object)
    for i, c in enumerate(comps):
        out[i] = c[()] if c.ndim == 0 else c
    return out


@dataclass
class Filter(Stage):
    child: Stage
    func: Any
    captures: tuple

    def blocks(self, env):
        caps = [r.get(env) for r in self.captures]
        for block in self.child.blocks(env):
            keep = np.fromiter((self._keep(env, [c[i] for c in block] + caps)
                                for i in range(len(block[0]))), bool, len(block[0]))
            if keep.all():
                yield block
            elif keep.any():
                yield tuple(c[keep] for c in block)

    def _keep(self, env, args) -> bool:
        try:
            return bool(np.asarray(_host(self.func.call(env.ctx, args)[0])))
        except OpError:
            if env.skip_errors:
                return False  # ignore_errors: the element is dropped
            raise


def _batch_size(ref: Ref, env: Env) -> int:
    n = _count(ref.get(env), "batch_size")
    if n <= 0:
        raise InvalidArgumentError("Batch size must be greater than zero.")
    return n


def _buffer_size(ref: Ref, env: Env) -> int:
    n = _count(ref.get(env), "buffer_size")
    if n <= 0:
        raise InvalidArgumentError("buffer_size must be greater than zero.")
    return n


# ---- batching --------------------------------------------------------------------------------

@dataclass
class Batch(Stage):
    child: Stage
    size: Ref
    drop_remainder: bool
    sparse: tuple = ()  # per component: a SparseTensor (see dataset_sparse)

    def check(self, env):
        _batch_size(self.size, env)
        super().check(env)

    def blocks(self, env):
        if any(self.sparse):
            from .dataset_sparse import fix_block
            for block in self._blocks(env):
                yield fix_block(block, self.sparse)
            return
        yield from self._blocks(env)

    def _blocks(self, env):
        n = _batch_size(self.size, env)
        pending, have = [], 0
        for block in self.child.blocks(env):
            pending.append(block)
            have += len(block[0])
            if have < n:
                continue
            k = have // n
            try:
                rows = _concat(pending)
            except InvalidArgumentError:
                if not env.skip_errors:
                    raise
                yield from _batches_of_one_shape(pending, n, k)  # ignore_errors, as TF
                pending = _tail(pending, have - k * n)
                have -= k * n
                continue
            yield tuple(c[:k * n].reshape((k, n) + c.shape[1:]) for c in rows)
            pending = [_rows(rows, k * n, None)] if have > k * n else []
            have -= k * n
        if have and not self.drop_remainder:
            try:
                yield tuple(c[None] for c in _concat(pending))
            except InvalidArgumentError:
                if not env.skip_errors:
                    raise


def _one_rows(blocks) -> list:
    return [tuple(c[i:i + 1] for c in b) for b in blocks for i in range(len(b[0]))]


def _batches_of_one_shape(blocks, n, k):
    """The first ``k`` batches of ``n`` rows of ``blocks``, less those whose rows differ in
    shape (TF fails such a batch alone; under ``ignore_errors`` it is dropped)."""
    rows = _one_rows(blocks)
    for j in range(k):
        group = rows[j * n:(j + 1) * n]
        if all(a.shape == b.shape for r in group for a, b in zip(r, group[0])):
            yield tuple(np.concatenate(c)[None] for c in zip(*group))


def _tail(blocks, m) -> list:
    """The last ``m`` rows of ``blocks``, one block per row."""
    rows = _one_rows(blocks)
    return rows[len(rows) - m:] if m else []


@dataclass
class PaddedBatch(Stage):
    child: Stage
    size: Ref
    shapes: tuple  # per component: tuple of dims (None: the batch's largest)
    pads: tuple  # Refs of scalar padding values
    drop_remainder: bool
    dtypes: tuple

    def check(self, env):
        _batch_size(self.size, env)
        super().check(env)

    def blocks(self, env):
        n = _batch_size(self.size, env)
        pads = [r.get(env) for r in self.pads]
        shapes = [tuple(_count(d.get(env), "padded_shapes") if isinstance(d, Ref) else d
                        for d in s) for s in self.shapes]
        buf = []
        for block in self.child.blocks(env):
            for i in range(len(block[0])):
                buf.append([c[i] for c in block])
                if len(buf) == n:
                    yield self._pad(buf, pads, shapes)
                    buf = []
        if buf and not self.drop_remainder:
            yield self._pad(buf, pads, shapes)

    def _pad(self, elems, pads, shapes):
        out = []
        for j, (shape, dt) in enumerate(zip(shapes, self.dtypes)):
            comps = [e[j] for e in elems]
            want = tuple(max(c.shape[d] for c in comps) if s is None else s
                         for d, s in enumerate(shape))
            arr = np.full((len(comps),) + want, pads[j], dtype=dt)
            for k, c in enumerate(comps):
                if any(a > b for a, b in zip(c.shape, want)):
                    raise InvalidArgumentError(
                        f"Attempted to pad to a smaller size than the input element: "
                        f"{list(c.shape)} into {list(want)}")
                arr[(k,) + tuple(slice(0, s) for s in c.shape)] = c
            out.append(arr[None])
        return tuple(out)


@dataclass
class Unbatch(Stage):
    child: Stage
    sparse: tuple = ()  # per component: a SparseTensor (see dataset_sparse)

    def blocks(self, env):
        if any(self.sparse):
            from .dataset_sparse import unbatch_blocks
            yield from unbatch_blocks(self.child.blocks(env), self.sparse)
            return
        for block in self.child.blocks(env):
            if any(c.ndim < 2 for c in block):
                raise InvalidArgumentError("Input element must have a non-scalar value in "
                                           "each component.")
            sizes = {c.shape[1] for c in block}
            if len(sizes) != 1:
                raise InvalidArgumentError("Input element must have the same batch size in "
                                           "each component.")
            if sizes.pop():
                yield tuple(c.reshape((-1,) + c.shape[2:]) for c in block)


# ---- order and counts ------------------------------------------------------------------------

@dataclass
class Shuffle(Stage):
    child: Stage
    buffer_size: Ref
    seed: int | None
    seed2: int | None
    reshuffle: bool
    key: int = 0  # unique within the pipeline: the Env's generator for this stage

    def _rng(self, env):
        if self.reshuffle and self.key in env.rngs:
            return env.rngs[self.key]
        seed = None if self.seed is None else [self.seed & 0xFFFFFFFF,
                                              (self.seed2 or 0) & 0xFFFFFFFF]
        rng = env.rngs[self.key] = np.random.default_rng(seed)
        return rng

    def check(self, env):
        _buffer_size(self.buffer_size, env)
        super().check(env)

    def blocks(self, env):
        size = _buffer_size(self.buffer_size, env)
        rng = self._rng(env)
        buf = None
        for block in self.child.blocks(env):
            pool = block if buf is None else _concat([buf, block])
            total = len(pool[0])
            if total <= size:
                buf = pool
                continue
            # TF's buffer: each incoming element replaces a uniformly chosen buffered one,
            # which is emitted. Only the indices move here; the rows are gathered once.
            m = total - size
            picks = rng.integers(0, size, size=m)
            slots = np.arange(size)
            out = np.empty(m, np.int64)
            for t, j in enumerate(picks.tolist()):
                out[t] = slots[j]
                slots[j] = size + t
            yield tuple(c[out] for c in pool)
            buf = tuple(c[slots] for c in pool)
        if buf is not None:
            order = rng.permutation(len(buf[0]))
            yield tuple(c[order] for c in buf)


@dataclass
class Repeat(Stage):
    child: Stage
    count: Ref

    def blocks(self, env):
        v = self.count.get(env)
        count = -1 if v is None else _count(v, "count")
        epochs = itertools.count() if count < 0 else range(count)
        for _ in epochs:
            empty = True
            for block in self.child.blocks(env):
                empty = False
                yield block
            if empty:
                return  # repeating nothing gives nothing (TF ends too)


@dataclass
class Take(Stage):
    child: Stage
    count: Ref

    def blocks(self, env):
        left = _count(self.count.get(env), "count")
        if left == 0:
            return
        for block in self.child.blocks(env):
            k = len(block[0])
            if 0 <= left <= k:
                yield _rows(block, 0, left)
                return
            yield block
            left -= k if left > 0 else 0


@dataclass
class Skip(Stage):
    child: Stage
    count: Ref

    def blocks(self, env):
        left = _count(self.count.get(env), "count")
        for block in self.child.blocks(env):
            if left < 0:
                continue
            k = len(block[0])
            if left >= k:
                left -= k
                continue
            yield _rows(block, left, None) if left else block
            left = 0


@dataclass
class Shard(Stage):
    child: Stage
    num_shards: Ref
    index: Ref

    def blocks(self, env):
        n, i = _count(self.num_shards.get(env), "num_shards"), _count(self.index.get(env),
                                                                      "index")
        if n <= 0 or not 0 <= i < n:
            raise InvalidArgumentError(f"Shard: index {i} must be in [0, num_shards {n})")
        seen = 0
        for block in self.child.blocks(env):
            k = len(block[0])
            keep = (seen + np.arange(k)) % n == i
            seen += k
            if keep.any():
                yield tuple(c[keep] for c in block)


@dataclass
class Cache(Stage):
    """In memory: the first complete pass is kept and later passes replay it."""
    child: Stage
    key: int = 0

    def blocks(self, env):
        got = env.caches.get(self.key)
        if got is not None:
            yield from got
            return
        kept = []
        for block in self.child.blocks(env):
            kept.append(block)
            yield block
        env.caches[self.key] = kept


@dataclass
class Identity(Stage):
    """``prefetch``: elements are computed when ``get_next`` asks for them."""
    child: Stage

    def blocks(self, env):
        return self.child.blocks(env)


@dataclass
class FlatMap(Stage):
    """``flat_map`` (``cycle`` None) and ``interleave``: each element opens the ``inner``
    pipeline, whose inputs ``func`` computes from the element (and the captures)."""
    child: Stage
    func: Any
    captures: tuple
    inner: Stage
    cycle: Ref | None
    block: Ref

    def _open(self, env, elem, caps):
        sub = Env([_host(v) for v in self.func.call(env.ctx, list(elem) + caps)], env.ctx)
        self.inner.check(sub)
        return sub, self.inner.blocks(sub)

    def _elements(self, env):
        for block in self.child.blocks(env):
            for i in range(len(block[0])):
                yield [c[i] for c in block]

    def blocks(self, env):
        caps = [r.get(env) for r in self.captures]
        if self.cycle is None:
            for elem in self._elements(env):
                sub, gen = self._open(env, elem, caps)
                yield from _follow(env, sub, gen)
            return
        yield from self._interleave(env, caps)

    def _interleave(self, env, caps):
        import os
        cycle = _count(self.cycle.get(env), "cycle_length")
        cycle = (os.cpu_count() or 1) if cycle <= 0 else cycle
        block_len = _count(self.block.get(env), "block_length")
        if block_len <= 0:
            raise InvalidArgumentError("block_length must be greater than zero.")
        inputs = self._elements(env)
        slots: list = [None] * cycle  # [generator of blocks, pending block]
        cur = taken = opened = 0
        done = False
        while not done or opened:
            slot = slots[cur]
            if slot is None:
                if not done:  # TF: open the next input element here, then read it
                    elem = next(inputs, None)
                    if elem is None:
                        done = True
                    else:
                        slots[cur] = [_follow(env, *self._open(env, elem, caps)), None]
                        opened += 1
                        continue
                cur, taken = (cur + 1) % cycle, 0
                continue
            if slot[1] is None:
                slot[1] = next(slot[0], None)
                if slot[1] is None:  # this element's dataset ended: next in the cycle
                    slots[cur] = None
                    opened -= 1
                    cur, taken = (cur + 1) % cycle, 0
                    continue
            k = min(block_len - taken, len(slot[1][0]))
            yield _rows(slot[1], 0, k)
            slot[1] = _rows(slot[1], k, None) if k < len(slot[1][0]) else None
            taken += k
            if taken == block_len:
                cur, taken = (cur + 1) % cycle, 0


def _follow(env: Env, sub: Env, gen):
    """An inner pipeline's blocks, its traced functions run with the outer step's context."""
    while True:
        sub.ctx, sub.skip_errors = env.ctx, env.skip_errors
        try:
            block = next(gen)
        except StopIteration:
            return
        yield block
