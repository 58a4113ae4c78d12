"""The rest of TF 1.15's ``tf.data`` surface: ``choose_from_datasets`` and
``sample_from_datasets`` (one directed interleave), ``Counter``, ``cardinality``, and
``Options``/``with_options``.

Design
------
Both ``choose_from_datasets`` and ``sample_from_datasets`` are TF's
``DirectedInterleaveDataset``: a *selector* stream of int64 indices picks, element by element,
which input gives the next element; an index whose input has ended is skipped (TF 1.15's
rule), and the whole ends when the selector ends or every input has. ``sample_from_datasets``'
selector draws from the (normalised) ``weights`` with a NumPy generator seeded like
``shuffle`` (the op seed, or the graph seed), fresh at each initialisation.

``cardinality`` is computed from the dataset's description when the graph is built, as TF's
``Cardinality()`` of each dataset kernel: a count where it is known (a source of static size,
``batch``, ``take``, ``skip``, ``repeat``, ``zip``, ``concatenate``, ``map`` …), ``-1``
(``INFINITE_CARDINALITY``) for an endless ``repeat`` and ``-2`` (``UNKNOWN_CARDINALITY``)
otherwise (``filter``, ``flat_map``, files, generators, a size fed at run time).

``Options`` are accepted and kept (``dataset.options()`` gives them back); tensorvm's pipeline
runs in the iterator's op, element by element, so threading and optimisation options change
nothing.

>>> import tensorvm as tv
>>> ds = tv.data.experimental.choose_from_datasets(
...     [tv.data.Dataset.range(3), tv.data.Dataset.range(10, 12)],
...     tv.data.Dataset.from_tensor_slices(tv.constant([1, 0, 1, 1, 0], tv.int64)))
>>> nxt = ds.make_one_shot_iterator().get_next()
>>> with tv.Session() as s:
...     [int(s.run(nxt)) for _ in range(4)]
[10, 0, 11, 1]
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.tensor_conversion import convert_to_tensor
from . import dataset_pipeline as P
from ..control.control_flow_ops import structure
from .dataset_ops import Dataset, _static_int

__all__: list[str] = []  # reached through tv.data and tv.data.experimental

INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


# ---- directed interleave ----------------------------------------------------------------------

class _DirectedInterleave(Dataset):
    def __init__(self, selector, datasets, weights=None, seed=None):
        from .dataset_windows import refuse_nested
        datasets = list(datasets)
        if not datasets:
            raise ValueError("`datasets` must be a non-empty list of datasets.")
        first = datasets[0]
        for d in datasets:
            if not isinstance(d, Dataset):
                raise TypeError(f"`datasets` must be a list of `tf.data.Dataset`, got {d!r}")
            refuse_nested(d, "sample_from_datasets")
            if d._dtypes != first._dtypes or structure(d._structure) != \
                    structure(first._structure):
                raise TypeError(f"All datasets must have the same type and structure: "
                                f"{first.output_types} and {d.output_types}")
        shapes = [tuple(s) if s is not None else None for s in first._shapes]
        for d in datasets[1:]:
            shapes = [_common(a, b) for a, b in zip(shapes, d._shapes)]
        self._children, self._selector = datasets, selector
        self._weights, self._seeds = weights, None
        if selector is None:
            from ..math.random_ops import get_seed
            self._seeds = get_seed(None if seed is None else _static_int(seed))
        super().__init__(first._structure, first._dtypes, shapes)

    def _compile(self, b):
        if self._selector is None:
            sel = Categorical(b.ref(self._weights), self._seeds[0], self._seeds[1], b.key())
        else:
            sel = self._selector._compile(b)
        return DirectedInterleave(sel, tuple(d._compile(b) for d in self._children))


def _common(a, b):
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


@dataclass
class Categorical(P.Stage):
    """Endless int64 draws from ``weights`` (normalised), 1024 at a time."""
    weights: P.Ref
    seed: int | None
    seed2: int | None
    key: int = 0

    def blocks(self, env, live=None):
        """Draws; ``live`` (a list of bools the consumer updates) leaves out the inputs that
        have ended, and ends the draws when no input of positive weight is left."""
        w = np.asarray(self.weights.get(env), dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
            raise InvalidArgumentError(f"sample_from_datasets: weights must be non-negative "
                                       f"with a positive sum, got {w.tolist()}")
        seed = None if self.seed is None else [self.seed & 0xFFFFFFFF,
                                               (self.seed2 or 0) & 0xFFFFFFFF]
        rng = env.rngs.setdefault(self.key, np.random.default_rng(seed))
        while True:
            p = w if live is None else np.where(live, w, 0.0)
            if p.sum() <= 0:
                return
            yield (rng.choice(len(p), size=1024, p=p / p.sum()).astype(np.int64),)


@dataclass
class DirectedInterleave(P.Stage):
    """The element of input ``selector[i]`` for each index the selector gives; an ended
    input's indices are skipped."""
    selector: P.Stage
    children: tuple

    def blocks(self, env):
        gens = [c.blocks(env) for c in self.children]
        pending: list = [None] * len(gens)  # (block, next row) per input
        live = len(gens)
        alive = [True] * len(gens)
        draws = self.selector.blocks(env, alive) if isinstance(self.selector, Categorical) \
            else self.selector.blocks(env)
        for (sel,) in draws:
            if sel.ndim != 1 or sel.dtype.kind not in "iu":
                raise InvalidArgumentError(f"the selector must give int64 scalars, got "
                                           f"{sel.dtype} of shape {list(sel.shape[1:])}")
            out = []
            for i in sel.tolist():
                if not 0 <= i < len(gens):
                    raise InvalidArgumentError(f"Selector index out of range: {i} >= "
                                               f"{len(gens)}")
                row = self._next(gens, pending, i)
                if row is None:
                    if gens[i] is not None:
                        gens[i], live, alive[i] = None, live - 1, False
                    if not live:
                        break
                    continue
                out.append(row)
            if out:
                yield from _runs(out)
            if not live:
                return

    @staticmethod
    def _next(gens, pending, i):
        if gens[i] is None:
            return None
        got = pending[i]
        while got is None or got[1] >= len(got[0][0]):
            block = next(gens[i], None)
            if block is None:
                return None
            got = pending[i] = [block, 0]
        row = [c[got[1]:got[1] + 1] for c in got[0]]
        got[1] += 1
        return row


def _runs(rows):
    """Single-row blocks joined where consecutive rows share their shapes."""
    run = [rows[0]]
    for r in rows[1:]:
        if all(a.shape == b.shape for a, b in zip(r, run[-1])):
            run.append(r)
            continue
        yield tuple(np.concatenate(c) for c in zip(*run))
        run = [r]
    yield tuple(np.concatenate(c) for c in zip(*run))


def choose_from_datasets(datasets, choice_dataset):
    """The element of ``datasets[c]`` for each ``c`` of ``choice_dataset`` (int64 scalars);
    the choices of an ended dataset are skipped."""
    if not isinstance(choice_dataset, Dataset) or choice_dataset._dtypes != (_dt.int64,) or \
            choice_dataset._shapes[0] not in ((), None):
        raise TypeError("`choice_dataset` must be a dataset of scalar `tf.int64` tensors.")
    return _DirectedInterleave(choice_dataset, datasets)


def sample_from_datasets(datasets, weights=None, seed=None):
    """Elements of ``datasets`` drawn at random with probabilities ``weights`` (default
    uniform; a list or a float tensor); an ended dataset is skipped, the result ends when
    all have."""
    datasets = list(datasets)
    if weights is None:
        weights = [1.0 / max(len(datasets), 1)] * len(datasets)
    if isinstance(weights, Dataset):
        raise TypeError("sample_from_datasets: weights given as a dataset are not "
                        "supported; give a list or a float tensor")
    w = weights if isinstance(weights, Tensor) else convert_to_tensor(
        np.asarray(weights, dtype=np.float32))
    if w._shape is not None and (len(w._shape) != 1 or w._shape[0] not in (None,
                                                                           len(datasets))):
        raise ValueError(f"`weights` must have shape [{len(datasets)}] (one per dataset), "
                         f"got {list(w._shape)}")
    return _DirectedInterleave(None, datasets, w, seed)


# ---- Counter and cardinality ------------------------------------------------------------------

def counter(start=0, step=1, dtype=_dt.int64) -> Dataset:
    """``start, start + step, …`` without end (``tf.data.experimental.Counter``)."""
    from ..math.math_ops import cast
    s, d = int(np.asarray(start)), int(np.asarray(step))
    if d == 0:
        raise InvalidArgumentError("step must be a non-zero integer.")
    end = np.iinfo(np.int64).max if d > 0 else np.iinfo(np.int64).min
    ds = Dataset.range(s, end, d)
    dtype = _dt.as_dtype(dtype)
    return ds if dtype == _dt.int64 else ds.map(lambda v: cast(v, dtype))


def _n(t):
    return _static_int(t) if isinstance(t, Tensor) else (None if t is None else int(t))


def _card_counted(ds) -> int:
    c = _card(ds._child)
    n = -1 if ds._count is None else _n(ds._count)  # repeat(): forever
    if n is None:
        return UNKNOWN_CARDINALITY
    if ds._stage is P.Repeat:  # TF's RepeatDatasetOp::Cardinality, case by case
        if n < 0:
            return 0 if c == 0 else INFINITE_CARDINALITY
        return 0 if n == 0 else c if c < 0 else c * n
    if ds._stage is P.Take:
        if n < 0:
            return c
        if c >= 0:
            return min(n, c)
        return n if c == INFINITE_CARDINALITY else UNKNOWN_CARDINALITY
    if c < 0:  # skip
        return c
    return 0 if n < 0 else max(0, c - n)


def _card_zip(ds) -> int:
    cs = [_card(c) for c in ds._children]
    if UNKNOWN_CARDINALITY in cs:
        return UNKNOWN_CARDINALITY
    known = [c for c in cs if c >= 0]
    return min(known) if known else INFINITE_CARDINALITY


def _card_concatenate(ds) -> int:
    a, c = _card(ds._a), _card(ds._c)
    if INFINITE_CARDINALITY in (a, c):
        return INFINITE_CARDINALITY
    return UNKNOWN_CARDINALITY if UNKNOWN_CARDINALITY in (a, c) else a + c


def _card_batch(ds) -> int:
    c, n = _card(ds._child), _n(ds._size)
    if n is None:
        return UNKNOWN_CARDINALITY
    if c < 0:
        return c
    return c // n if ds._drop else -(-c // n)


def _card_shard(ds) -> int:
    c, n, i = _card(ds._child), _n(ds._n), _n(ds._i)
    if c < 0:
        return c
    if n is None or i is None:
        return UNKNOWN_CARDINALITY
    return c // n + (1 if i < c % n else 0)


def _card_window(ds) -> int:
    c = _card(ds._child)
    size, shift, stride = _n(ds._size), _n(ds._shift), _n(ds._stride)
    if c < 0:
        return c
    if None in (size, shift, stride):
        return UNKNOWN_CARDINALITY
    if ds._drop:
        return max(0, (c - (size - 1) * stride - 1) // shift + 1)
    return -(-c // shift)


def _card_source(ds) -> int | None:
    from . import dataset_ops as O
    if isinstance(ds, O._Range):
        start, stop, step = (_n(a) for a in ds._args)
        if None in (start, stop, step):
            return UNKNOWN_CARDINALITY
        return max(0, -(-(stop - start) // step))
    if isinstance(ds, O._TensorSlices):
        dims = {t._shape[0] for t in ds._flat if t._shape is not None} - {None}
        return dims.pop() if dims else UNKNOWN_CARDINALITY
    if isinstance(ds, O._Tensors):
        return 1
    return None


def _card(ds) -> int:
    """TF's ``Cardinality()`` of ``ds``, from its description (see the module docstring)."""
    from . import dataset_ops as O
    from . import dataset_transforms as T
    from . import dataset_windows as W
    got = _card_source(ds)
    if got is not None:
        return got
    rules = ((O._Zip, _card_zip), (O._Concatenate, _card_concatenate),
             (T._Counted, _card_counted), ((T._Batch, T._PaddedBatch), _card_batch),
             (T._Shard, _card_shard), (W._Window, _card_window))
    for kind, rule in rules:
        if isinstance(ds, kind):
            return rule(ds)
    same = isinstance(ds, (T._Map, T._Shuffle, W._Scan)) or type(ds).__name__ == \
        "_FileCached" or isinstance(ds, T._Unary) and ds._stage in (P.Cache, P.Identity)
    return _card(ds._child) if same else UNKNOWN_CARDINALITY


def cardinality(dataset):
    """The number of elements of ``dataset`` as an int64 scalar tensor: ``-1`` for an endless
    one, ``-2`` where it cannot be known before reading it."""
    return convert_to_tensor(np.int64(_card(dataset)))


# ---- options ------------------------------------------------------------------------------------

class _Group:
    """A group of options (``experimental_optimization`` …): any attribute may be set."""

    def __repr__(self):
        return f"{type(self).__name__}({vars(self)})"


class Options:
    """``tf.data.Options``: kept with the dataset (``with_options``), read back by
    ``dataset.options()``; they change nothing in tensorvm's pipeline (see the module
    docstring). ``experimental_optimization``, ``experimental_threading``,
    ``experimental_distribute`` and ``experimental_stats`` are groups whose attributes may be
    set as in TF."""

    def __init__(self):
        self.experimental_deterministic = None
        self.experimental_slack = None
        for g in ("experimental_optimization", "experimental_threading",
                  "experimental_distribute", "experimental_stats"):
            setattr(self, g, _Group())

    def merge(self, other):
        """These options with ``other``'s set values on top."""
        out = copy.deepcopy(self)
        for k, v in vars(other).items():
            if isinstance(v, _Group):
                vars(getattr(out, k)).update(vars(v))
            elif v is not None:
                setattr(out, k, v)
        return out

    def __repr__(self):
        return f"Options({ {k: v for k, v in vars(self).items() if v is not None} })"


def with_options(ds, options):
    """``ds`` with ``options`` merged into its own."""
    if not isinstance(options, Options):
        raise TypeError(f"with_options: expected a tf.data.Options, got {options!r}")
    out = copy.copy(ds)
    out._options = ds.options().merge(options)
    return out
