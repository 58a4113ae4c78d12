"""The value a TensorArray's flow tensor carries: one *version* of the array's elements.

A TensorArray is a value, not a resource: every write returns a new version and the versions a
reader already holds never change. Versions of one lineage share one store (a "fat node"
persistent array): each index keeps the list of ``(version, element)`` it was given, and a
version sees, at each index, the newest element no newer than itself. A write on the newest
version of its store appends in place — O(1) per element, no copy of the array; a write on an
older version (two writes from one flow, a ``while_loop``'s gradient recomputing its body from
its tape) first copies the references that version sees into a fresh store (the elements
themselves are never copied).

Elements are whatever arrays the kernels were given (device arrays stay device arrays).
*Gradient* arrays (``grad=True``) aggregate: a second write to an index adds to it, and an
index never written reads as zeros; ``np.zeros_like`` of any TensorArray value is the empty
gradient array, so the gradient machinery's zeros and sums (``AddN``, a ``while_loop``'s
accumulated gradients) work on them unchanged.

>>> import numpy as np
>>> a = TensorArrayValue.new(3)
>>> b = a.updated([(0, np.ones(2))])
>>> c = b.updated([(1, np.zeros(2))])
>>> [b.get(1) is MISSING, c.get(1).tolist()]
[True, [0.0, 0.0]]
>>> d = b.updated([(1, np.full(2, 7.0))])   # from an older version: a fresh store
>>> c.get(1).tolist(), d.get(1).tolist()
([0.0, 0.0], [7.0, 7.0])
"""
from __future__ import annotations

import threading

import numpy as np

from ...framework.errors import InvalidArgumentError

__all__: list[str] = []

MISSING = object()  # an index this version has no element for


class _Store:
    """Elements of every version of one lineage: ``items[i]`` is ``[(version, element)]`` in
    increasing version order; ``latest`` is the newest version (only it writes in place)."""

    __slots__ = ("items", "latest", "lock")

    def __init__(self, items=None):
        self.items: dict[int, list] = items if items is not None else {}
        self.latest = 0
        self.lock = threading.Lock()


class TensorArrayValue:
    """One version of a TensorArray (see the module docstring). ``size`` is the number of
    elements (for a dynamic array: the largest index written + 1, or the initial size);
    ``elem_shape`` the element shape known so far (a tuple with ``None`` for unknown dims, or
    None); ``name`` appears in error messages as TF's ``TensorArray <name>: ...``."""

    __slots__ = (
        "_store",
        "_version",
        "dynamic",
        "elem_dtype",
        "elem_shape",
        "grad",
        "infer_shape",
        "name",
        "size",
    )
    _tv_loop_value = True  # a while_loop carries it as is (no np.asarray)

    def __init__(self, store, version, size, *, dynamic=False, elem_shape=None,
                 infer_shape=True, grad=False, name="TensorArray", elem_dtype=None):
        self._store, self._version = store, version
        self.size, self.dynamic, self.elem_shape = size, dynamic, elem_shape
        self.infer_shape, self.grad, self.name = infer_shape, grad, name
        self.elem_dtype = elem_dtype  # a NumPy dtype (for zeros)

    @classmethod
    def new(cls, size, **kw) -> TensorArrayValue:
        """An array of ``size`` unwritten elements."""
        return cls(_Store(), 0, int(size), **kw)

    @classmethod
    def empty_grad(cls) -> TensorArrayValue:
        """A gradient array with no element (every index reads as zeros)."""
        return cls(_Store(), 0, 0, dynamic=True, grad=True, name="TensorArrayGrad")

    @classmethod
    def grad_one(cls, i: int, x) -> TensorArrayValue:
        """``empty_grad().updated([(i, x)])`` made directly (a while_loop's gradient makes one
        per iteration)."""
        st = _Store({i: [(1, x)]})
        st.latest = 1
        return cls(st, 1, 0, dynamic=True, grad=True, name="TensorArrayGrad")

    def _derive(self, store, version, size, **changes) -> TensorArrayValue:
        new = object.__new__(TensorArrayValue)  # every slot copied, then the changes
        new._store, new._version, new.size = store, version, size
        new.dynamic, new.elem_shape, new.infer_shape = \
            self.dynamic, self.elem_shape, self.infer_shape
        new.grad, new.name, new.elem_dtype = self.grad, self.name, self.elem_dtype
        for k, v in changes.items():
            setattr(new, k, v)
        return new

    def __repr__(self):
        return f"<TensorArrayValue {self.name} size={self.size} v{self._version}>"

    # ---- reading -------------------------------------------------------------------------
    def get(self, i: int):
        """The element at ``i`` in this version, or :data:`MISSING`."""
        entries = self._store.items.get(i)
        if entries:
            for ver, x in reversed(entries):
                if ver <= self._version:
                    return x
        return MISSING

    def indices(self) -> list[int]:
        """The indices this version has elements for, in increasing order."""
        return sorted(i for i in self._store.items if self.get(i) is not MISSING)

    def any_element(self):
        """Some element of this version (to take an array namespace from), or None."""
        for i in self._store.items:
            x = self.get(i)
            if x is not MISSING:
                return x
        return None

    # ---- writing -------------------------------------------------------------------------
    def updated(self, pairs, *, size=None, elem_shape=MISSING) -> TensorArrayValue:
        """A new version with the ``(index, element)`` pairs written (added to what is there,
        for a gradient array). Checks come first: a failed write changes nothing."""
        pairs = list(pairs)
        st = self._store
        with st.lock:
            if st.latest == self._version:
                return self._write(st, pairs, size, elem_shape)
        st = self._snapshot()
        with st.lock:
            return self._write(st, pairs, size, elem_shape)

    def written(self, i: int, x, size: int, elem_shape) -> TensorArrayValue:
        """``updated([(i, x)], size=size, elem_shape=elem_shape)`` for a value array (a
        loop's write each iteration): in place when this is its store's newest version and
        its lineage never wrote ``i``, else by :meth:`updated` (its checks and errors)."""
        st = self._store
        if not self.grad:
            with st.lock:
                if st.latest == self._version and i not in st.items:
                    v = st.latest + 1
                    st.items[i] = [(v, x)]
                    st.latest = v
                    return self._derive(st, v, size, elem_shape=elem_shape)
        return self.updated([(i, x)], size=size, elem_shape=elem_shape)

    def _write(self, st, pairs, size, elem_shape):
        v = st.latest + 1
        if self.grad:
            merged: dict[int, object] = {}
            for i, x in pairs:
                old = merged.get(i, MISSING)
                if old is MISSING:
                    old = self.get(i)
                merged[i] = x if old is MISSING else old + x
            pairs = list(merged.items())
        else:
            seen = set()
            for i, _ in pairs:
                if i in seen or self.get(i) is not MISSING:
                    raise InvalidArgumentError(
                        f"TensorArray {self.name}: Could not write to TensorArray index {i} "
                        "because it has already been written to.")
                seen.add(i)
        for i, x in pairs:
            st.items.setdefault(i, []).append((v, x))
        st.latest = v
        kw = {} if elem_shape is MISSING else {"elem_shape": elem_shape}
        return self._derive(st, v, self.size if size is None else size, **kw)

    def _snapshot(self) -> _Store:
        """A fresh store holding (references to) what this version sees, all at this
        version's number (so this version is its newest)."""
        items = {}
        for i in list(self._store.items):
            x = self.get(i)
            if x is not MISSING:
                items[i] = [(self._version, x)]
        st = _Store(items)
        st.latest = self._version
        return st

    # ---- as a value among arrays ---------------------------------------------------------
    def copy(self) -> TensorArrayValue:
        """Itself: a version never changes (``AddN`` copies its first input)."""
        return self

    def __add__(self, other):
        """The sum of two gradient arrays (elements at one index added)."""
        other = as_value(other)
        if other is None or not other._store.items:
            return self
        if not self._store.items:
            return other
        big, small = (self, other) if len(self._store.items) >= len(other._store.items) \
            else (other, self)
        items = small._store.items
        if len(items) == 1:  # one element (a loop iteration's gradient): no sort
            i = next(iter(items))
            x = small.get(i)
            return big if x is MISSING else big.updated([(i, x)])
        return big.updated([(i, small.get(i)) for i in small.indices()])

    __radd__ = __add__

    def __array_function__(self, func, types, args, kwargs):
        if func is np.zeros_like:
            return TensorArrayValue.empty_grad()
        return _AS_SCALAR.get(func, NotImplemented)  # np.shape & co: a scalar object

    def __reduce__(self):
        st = self._snapshot()
        return (_rebuild, ({i: e[0][1] for i, e in st.items.items()}, self.size, self.dynamic,
                           self.elem_shape, self.infer_shape, self.grad, self.name,
                           self.elem_dtype))


_AS_SCALAR = {np.shape: (), np.ndim: 0, np.size: 1}


def _rebuild(items, size, dynamic, elem_shape, infer_shape, grad, name, elem_dtype):
    st = _Store({i: [(0, x)] for i, x in items.items()})
    return TensorArrayValue(st, 0, size, dynamic=dynamic, elem_shape=elem_shape,
                            infer_shape=infer_shape, grad=grad, name=name,
                            elem_dtype=elem_dtype)


def as_value(x):
    """``x`` as a TensorArrayValue: unwraps a 0-d object array; a zero (a folded
    ``zeros_like``) or None is the empty gradient array."""
    if isinstance(x, TensorArrayValue):
        return x
    if isinstance(x, np.ndarray) and x.dtype == object and x.ndim == 0:
        return as_value(x.item())
    if x is None or (isinstance(x, (int, float, np.generic)) and x == 0):
        return TensorArrayValue.empty_grad()
    raise InvalidArgumentError(f"expected a TensorArray value, got {type(x).__name__}")
