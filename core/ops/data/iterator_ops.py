"""``tv.data.Iterator``: the resource that reads a :class:`~tensorvm.ops.data.dataset_ops.Dataset`.

Design
------
An iterator is a resource like a queue: an :class:`IteratorState` in the ResourceMgr of the
device its ops run on, keyed by ``(container, shared_name or the iterator op's name)`` — and,
without a ``shared_name``, by session (:class:`SessionIterators`: TF deletes such an iterator
with its session, so a later session on a cluster starts afresh). Every
iterator op carries the iterator's spec as an attr and is colocated with the ``IteratorV2``
op, so ``initializer`` and ``get_next`` run where the state lives, whatever device block built
them; the state keeps its position across ``Session.run`` calls and is CPU-only (host values,
Python generators).

* ``MakeIterator`` (an ``initializer``, or ``make_initializer(dataset)``) takes the values the
  pipeline reads — tensors that are not constants: placeholders fed with the ``initializer``,
  tensors captured by ``map`` functions — and (re)starts the pipeline: the stages of
  :mod:`tensorvm.ops.data.dataset_pipeline`, compiled from the dataset when the op was built.
* ``IteratorGetNext`` returns the next element, in the dataset's structure; at the end of the
  data it raises ``OutOfRangeError("End of sequence")`` (and again on every later call, until
  re-initialised); before any initialisation ``FailedPreconditionError``, as TF.
* ``make_one_shot_iterator()``'s ``get_next`` carries the compiled pipeline itself and
  initialises the state on its first run (a dataset that reads a placeholder is refused, as
  TF refuses it).

>>> import tensorvm as tv
>>> p = tv.placeholder(tv.int64, [None])
>>> it = tv.data.Dataset.from_tensor_slices(p).batch(2).make_initializable_iterator()
>>> nxt = it.get_next()
>>> with tv.Session() as s:
...     _ = s.run(it.initializer, {p: [1, 2, 3]})
...     [s.run(nxt).tolist() for _ in range(2)]
[[1, 2], [3]]
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import FailedPreconditionError, InvalidArgumentError, OutOfRangeError
from ...framework.graph import Tensor, TensorShape, get_default_graph
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.sparse_tensor import SparseTensor, SparseTensorValue
from . import dataset_pipeline as P
from ..control.control_flow_ops import flatten, pack_as, structure
from .dataset_sparse import (
    SPARSE,
    expand_outputs,
    expand_signature,
    is_sparse_class,
    is_sparse_leaf,
    pack_outputs,
)

__all__: list[str] = []  # exported as tv.data.Iterator

_NOT_INITIALIZED = ("GetNext() failed because the iterator has not been initialized. Ensure "
                    "that you have run the initializer operation for this iterator before "
                    "getting the next element.")


class IteratorState:
    """An iterator's position: the generator of the current initialisation's blocks, the
    current block and the index of the next element in it."""

    kind = "Iterator"
    LOST_WITH_WORKER = True  # see runtime.ResourceMgr: never re-created silently

    def __init__(self, spec: dict):
        self.spec = spec
        self.name = spec["name"]
        self.lock = threading.Lock()
        self.env: P.Env | None = None
        self.gen = None
        self.block = None
        self.pos = 0
        self.elements = 0  # handed out since the last initialisation (introspection)

    def initialize(self, stage: P.Stage, inputs, ctx) -> None:
        env = P.Env(list(inputs), ctx)
        stage.check(env)
        with self.lock:
            self.env = env
            self.gen = stage.blocks(self.env)
            self.block, self.pos, self.elements = None, 0, 0

    def get_next(self, ctx) -> tuple:
        with self.lock:
            if self.gen is None:
                raise FailedPreconditionError(_NOT_INITIALIZED)
            while self.block is None or self.pos >= len(self.block[0]):
                self.env.ctx = ctx
                try:
                    self.block = next(self.gen)
                except StopIteration:
                    self.gen, self.block = iter(()), None
                    raise OutOfRangeError("End of sequence") from None
                except BaseException:
                    self.gen, self.block = iter(()), None  # a failed pipeline has ended
                    raise
                self.pos = 0
            i = self.pos
            self.pos += 1
            self.elements += 1
            return tuple(_element(c[i], c.dtype) for c in self.block)

    def __repr__(self):
        return f"<Iterator '{self.name}' elements={self.elements}>"


def _element(v, dtype):
    if isinstance(v, SparseTensorValue):  # a sparse component (see dataset_sparse)
        return v
    return P.as_component(v, dtype).copy()


def _outputs(spec, out: tuple):
    """An element as the op's outputs (a sparse component as its three arrays)."""
    sparse = spec.get("sparse")
    if sparse and any(sparse):
        out = expand_outputs(out, sparse)
    return out[0] if len(out) == 1 else out


class SessionIterators:
    """The states of an iterator made without a ``shared_name``: one per session, as TF
    deletes such an iterator with its session's kernels (a later session of the same graph on
    a cluster, whose worker resources outlive sessions, starts afresh). The oldest sessions'
    states are dropped beyond :attr:`MAX`."""

    kind = "Iterator"
    LOST_WITH_WORKER = True  # see runtime.ResourceMgr: never re-created silently
    MAX = 32

    def __init__(self, spec: dict):
        self.spec = spec
        self._by_session: OrderedDict[str, IteratorState] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session: str) -> IteratorState:
        """This session's state, made on first use."""
        with self._lock:
            st = self._by_session.get(session)
            if st is None:
                st = self._by_session[session] = IteratorState(self.spec)
                while len(self._by_session) > self.MAX:
                    self._by_session.popitem(last=False)
            else:
                self._by_session.move_to_end(session)
            return st


def _session_of(ctx) -> str:
    return "" if ctx.step_id is None else str(ctx.step_id).split(".", 1)[0]


def _resolve(res, ctx) -> IteratorState:
    return res.get(_session_of(ctx)) if isinstance(res, SessionIterators) else res


def _state(ctx, spec) -> IteratorState:
    if spec.get("shared"):  # a shared_name: one state for every session, as TF
        return ctx.resources.lookup_or_create(spec.get("container", ""),
                                              "iterator:" + spec["name"],
                                              lambda: IteratorState(spec))
    return _resolve(ctx.resources.lookup_or_create(spec.get("container", ""),
                                                   "iterator:" + spec["name"],
                                                   lambda: SessionIterators(spec)), ctx)


# ---- kernels and ops -------------------------------------------------------------------------

def _handle_kernel(ctx, *inputs, iterator, stage=None):
    st = _state(ctx, iterator)
    if stage is not None and st.gen is None:
        st.initialize(stage, inputs, ctx)
    return np.asarray(f"{ctx.device};{iterator.get('container', '')};{iterator['name']}",
                      dtype=object)


def _from_handle_kernel(ctx, handle, *, dtypes, shapes, sparse=None):
    text = str(np.asarray(handle, dtype=object)[()])
    parts = text.split(";")
    if len(parts) != 3:
        raise InvalidArgumentError(f"{text!r} is not an iterator handle (make one with "
                                   "iterator.string_handle())")
    device, container, name = parts
    if device != ctx.device:
        raise InvalidArgumentError(
            f"the iterator handle names iterator {name!r} on {device}, but this get_next runs "
            f"on {ctx.device}: build the feedable iterator under tv.device({device!r})")
    st = _resolve(ctx.resources.lookup(container, "iterator:" + name), ctx)
    if tuple(st.spec["dtypes"]) != tuple(dtypes):
        raise InvalidArgumentError(
            f"iterator {name!r} has output types {[d.name for d in st.spec['dtypes']]}, "
            f"expected {[d.name for d in dtypes]}")
    none = (False,) * len(dtypes)
    if tuple(st.spec.get("sparse") or none) != tuple(sparse or none):
        raise InvalidArgumentError(f"iterator {name!r} has SparseTensor components where "
                                   "the feedable iterator's output_classes have none, or the "
                                   "other way round")
    return _outputs({"sparse": sparse}, st.get_next(ctx))


def _make_kernel(ctx, *inputs, iterator, stage):
    _state(ctx, iterator).initialize(stage, inputs, ctx)
    return ()


def _get_next_kernel(ctx, *inputs, iterator, stage=None):
    st = _state(ctx, iterator)
    if stage is not None and st.gen is None:
        st.initialize(stage, inputs, ctx)  # a one-shot iterator starts on first use
    return _outputs(iterator, st.get_next(ctx))


def _get_next_shape(inputs, attrs):
    spec = attrs["iterator"]
    return expand_signature(spec["dtypes"], spec["shapes"], spec.get("sparse"))


register_op("IteratorV2", lambda i, a: [(_dt.string, ())], _handle_kernel, stateful=True,
            needs_ctx=True, differentiable=False)
register_op("MakeIterator", lambda i, a: [], _make_kernel, stateful=True, needs_ctx=True,
            differentiable=False)
register_op("IteratorGetNextFromStringHandle",
            lambda i, a: expand_signature(a["dtypes"], a["shapes"], a.get("sparse")),
            _from_handle_kernel,
            stateful=True, needs_ctx=True, differentiable=False)
register_op("IteratorGetNext", _get_next_shape, _get_next_kernel, stateful=True,
            needs_ctx=True, differentiable=False)


# ---- ops that read a whole dataset: reduce, get_single_element ------------------------------

def _reduce_kernel(ctx, *inputs, stage, func, n_inputs, n_state, dtypes, shapes):
    from .dataset_windows import _np_dtypes, fold
    env = P.Env(list(inputs[:n_inputs]), ctx)
    state = list(inputs[n_inputs:n_inputs + n_state])
    out = fold(stage, env, func, state, list(inputs[n_inputs + n_state:]), _np_dtypes(dtypes))
    return out[0] if len(out) == 1 else tuple(out)


def _single_kernel(ctx, *inputs, stage, dtypes, shapes, sparse=None):
    env = P.Env(list(inputs), ctx)
    stage.check(env)
    got = None
    for block in stage.blocks(env):
        if got is not None or len(block[0]) > 1:
            raise InvalidArgumentError("Dataset had more than one element.")
        got = block
        env.ctx = ctx
    if got is None:
        raise InvalidArgumentError("Dataset was empty.")
    return _outputs({"sparse": sparse}, tuple(_element(c[0], c.dtype) for c in got))


def _to_tfrecord_kernel(ctx, *inputs, stage, compression):
    from ...storage import tfrecord
    env = P.Env(list(inputs[1:]), ctx)
    stage.check(env)
    url = str(np.asarray(inputs[0], dtype=object)[()])

    def records():
        for (block,) in stage.blocks(env):
            env.ctx = ctx
            for r in block.tolist():
                yield r.encode("utf-8", "surrogateescape") if isinstance(r, str) else bytes(r)
    tfrecord.write_tfrecords(url, records(), compression or None)
    return ()


register_op("DatasetToTFRecord", lambda i, a: [], _to_tfrecord_kernel, stateful=True,
            needs_ctx=True, differentiable=False)


def write_tfrecord(ds, filename, compression_type=None):
    """The op that writes every element of ``ds`` (scalar strings) as a record of the
    TFRecord file ``filename`` (``tf.data.experimental.TFRecordWriter(...).write(ds)``); the
    file appears whole when the op finishes."""
    from ...framework import dtypes as dt
    from ...framework.tensor_conversion import convert_to_tensor
    from .dataset_ops import _Builder
    from .dataset_windows import refuse_nested
    refuse_nested(ds, "TFRecordWriter.write")
    if ds._dtypes != (dt.string,) or ds._shapes[0] not in ((), None):
        raise TypeError(f"`dataset` must produce scalar `DT_STRING` tensors whereas it "
                        f"produces shape {ds.output_shapes} and types {ds.output_types}")
    kind = (compression_type or "").upper()
    if kind not in ("", "GZIP", "ZLIB"):
        raise InvalidArgumentError(f"Unsupported compression_type: {compression_type!r}")
    b = _Builder(one_shot=False)
    stage = ds._compile(b)
    with ds._graph.as_default():
        name = convert_to_tensor(filename, dtype=dt.string)
        return apply_op("DatasetToTFRecord", [name] + list(b.inputs),
                        {"stage": stage, "compression": kind}, name="DatasetToTFRecord")


def _outputs_shape(inputs, attrs):
    return list(zip(attrs["dtypes"], attrs["shapes"]))


register_op("ReduceDataset", _outputs_shape, _reduce_kernel, stateful=True, needs_ctx=True,
            differentiable=False)
register_op("DatasetToSingleElement",
            lambda i, a: expand_signature(a["dtypes"], a["shapes"], a.get("sparse")),
            _single_kernel, stateful=True,
            needs_ctx=True, differentiable=False)


def reduce_dataset(ds, initial_state, reduce_func):
    """``ds.reduce(initial_state, reduce_func)``: one op that runs the whole pipeline when it
    runs (each time), folding the elements into the state."""
    from .dataset_ops import _Builder
    from .dataset_windows import refuse_nested, trace_with_state
    refuse_nested(ds, "reduce")
    func, caps, init, state, shapes, _ = trace_with_state(ds, reduce_func, initial_state,
                                                          "reduce", pair=False)
    b = _Builder(one_shot=False)
    stage = ds._compile(b)
    g = ds._graph
    with g.as_default():
        op = apply_op("ReduceDataset", list(b.inputs) + init + caps,
                      {"stage": stage, "func": func, "n_inputs": len(b.inputs),
                       "n_state": len(init), "dtypes": tuple(t.dtype for t in init),
                       "shapes": tuple(shapes)}, name="ReduceDataset")
    return pack_as(state, list(op.outputs))


def get_single_element(ds):
    """``tf.data.experimental.get_single_element(ds)``: the dataset's one element."""
    from .dataset_ops import _Builder
    from .dataset_windows import refuse_nested
    refuse_nested(ds, "get_single_element")
    b = _Builder(one_shot=False)
    stage = ds._compile(b)
    with ds._graph.as_default():
        op = apply_op("DatasetToSingleElement", list(b.inputs),
                      {"stage": stage, "dtypes": ds._dtypes, "shapes": ds._shapes,
                       "sparse": ds._sparse}, name="DatasetToSingleElement")
    return pack_as(ds._structure, pack_outputs(list(op.outputs), ds._sparse, ds._shapes))


# ---- the Python class ------------------------------------------------------------------------

def _shapes_compatible(a, b) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _fmt(structure_, leaves):
    return pack_as(structure_, list(leaves))


def _sparse_of(structure_, n) -> tuple:
    leaves = flatten(structure_)
    return tuple(is_sparse_leaf(x) for x in leaves) if len(leaves) == n else (False,) * n


def _with_classes(structure_, output_classes):
    """``structure_`` (of ``output_types``) with :data:`SPARSE` leaves where
    ``output_classes`` names a SparseTensor."""
    from .dataset_ops import _flatten_like
    if output_classes is None:
        return structure_
    classes = _flatten_like(structure_, output_classes)
    return pack_as(structure_, [SPARSE if is_sparse_class(c) else 0 for c in classes])


class Iterator:
    """Reads a dataset's elements one ``get_next()`` at a time (TF 1.x ``tf.data.Iterator``).

    Made by ``dataset.make_one_shot_iterator()``, ``dataset.make_initializable_iterator()``
    or ``Iterator.from_structure(types, shapes)`` (then ``make_initializer(dataset)`` for each
    dataset it should read).
    """

    def __init__(self, structure_, dtypes, shapes, shared_name=None, name="Iterator",
                 graph=None, one_shot=None):
        g = graph or get_default_graph()
        self._structure = structure_
        self._dtypes = tuple(dtypes)
        self._shapes = tuple(shapes)
        self._sparse = _sparse_of(structure_, len(self._dtypes))
        spec = {"name": None, "container": "", "dtypes": self._dtypes, "shapes": self._shapes,
                "sparse": self._sparse}
        # A one-shot iterator's op starts the pipeline on its first run (so does its
        # get_next): its string_handle() is usable before any get_next ran, as TF's.
        stage, inputs = one_shot or (None, [])
        with g.as_default():
            op = apply_op("IteratorV2", list(inputs), {"iterator": spec, "stage": stage},
                          name=name)
        op.colocation = op.name
        spec["name"] = shared_name or op.name
        spec["shared"] = bool(shared_name)
        self._spec = spec
        self._op = op
        self._initializer = None
        self._one_shot = one_shot  # (stage, inputs) of a one-shot iterator

    # ---- construction ----------------------------------------------------------------------
    @classmethod
    def _one_shot(cls, ds):
        from .dataset_ops import _Builder
        from .dataset_windows import refuse_nested
        refuse_nested(ds, "make_one_shot_iterator")
        b = _Builder(one_shot=True)
        stage = ds._compile(b)
        return cls(ds._structure, ds._dtypes, ds._shapes, name="OneShotIterator",
                   graph=ds._graph, one_shot=(stage, b.inputs))

    @classmethod
    def _initializable(cls, ds, shared_name=None):
        it = cls(ds._structure, ds._dtypes, ds._shapes, shared_name, graph=ds._graph)
        it._initializer = it.make_initializer(ds)
        return it

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name=None,
                       output_classes=None) -> Iterator:
        """An iterator of elements with these (nested) types and shapes, not bound to a
        dataset: run ``make_initializer(dataset)`` to (re)start it on one."""
        from .dataset_ops import _as_shape, _flatten_like, _types_structure
        structure_ = _types_structure(output_types)
        dtypes = [_dt.as_dtype(d) for d in _flatten_like(structure_, output_types)]
        shapes = [None] * len(dtypes) if output_shapes is None else \
            [_as_shape(s).dims for s in _flatten_like(structure_, output_shapes)]
        return Iterator(_with_classes(structure_, output_classes), dtypes, shapes, shared_name)

    @staticmethod
    def from_string_handle(string_handle, output_types, output_shapes=None,
                           output_classes=None) -> _FeedableIterator:
        """A *feedable* iterator: its ``get_next`` reads the iterator whose
        :meth:`string_handle` value is fed to ``string_handle`` (a string placeholder),
        which must have these types (and live on the device this one is built on)."""
        from .dataset_ops import _as_shape, _flatten_like, _types_structure
        structure_ = _types_structure(output_types)
        dtypes = [_dt.as_dtype(d) for d in _flatten_like(structure_, output_types)]
        shapes = [None] * len(dtypes) if output_shapes is None else \
            [_as_shape(s).dims for s in _flatten_like(structure_, output_shapes)]
        return _FeedableIterator(string_handle, _with_classes(structure_, output_classes),
                                 dtypes, shapes)

    def string_handle(self, name=None) -> Tensor:
        """A string tensor naming this iterator, to feed a :meth:`from_string_handle`
        iterator."""
        return self._op.outputs[0]

    def make_initializer(self, dataset, name=None):
        """The op that (re)starts this iterator on ``dataset`` (same types, compatible
        shapes)."""
        from .dataset_ops import _Builder
        from .dataset_windows import refuse_nested
        refuse_nested(dataset, "an iterator")
        if structure(dataset._structure) != structure(self._structure) or \
                dataset._dtypes != self._dtypes:
            raise TypeError(f"Expected output types {self.output_types} but got dataset with "
                            f"output types {dataset.output_types}.")
        if tuple(dataset._sparse) != self._sparse:
            raise TypeError(f"Expected output classes {self.output_classes} but got dataset "
                            f"with output classes {dataset.output_classes}.")
        if not all(_shapes_compatible(a, b) for a, b in zip(self._shapes, dataset._shapes)):
            raise TypeError(f"Expected output shapes compatible with {self.output_shapes} but "
                            f"got dataset with output shapes {dataset.output_shapes}.")
        b = _Builder(one_shot=False)
        stage = dataset._compile(b)
        return self._apply("MakeIterator", b.inputs, {"stage": stage}, name or "MakeIterator")

    def _apply(self, op_type, inputs, attrs, name):
        g = self._op.graph
        with g.as_default(), g.device(None):
            return apply_op(op_type, list(inputs), {"iterator": self._spec, **attrs},
                            name=name, colocation=self._op.name)

    # ---- use ---------------------------------------------------------------------------------
    @property
    def initializer(self):
        if self._initializer is None:
            raise ValueError("Iterator does not have an initializer.")
        return self._initializer

    def get_next_as_optional(self):
        """The next element as a ``tv.data.experimental.Optional`` (empty at the end of the
        data, instead of ``OutOfRangeError``)."""
        return get_next_as_optional(self)

    def get_next(self, name=None):
        """The next element, in the dataset's structure (``OutOfRangeError`` at the end)."""
        inputs, attrs = [], {}
        if self._one_shot is not None:
            attrs["stage"], inputs = self._one_shot
        op = self._apply("IteratorGetNext", inputs, attrs, name or "IteratorGetNext")
        return pack_as(self._structure, pack_outputs(list(op.outputs), self._sparse, self._shapes))

    @property
    def name(self) -> str:
        return self._spec["name"]

    @property
    def output_types(self):
        return _fmt(self._structure, self._dtypes)

    @property
    def output_shapes(self):
        return _fmt(self._structure, [TensorShape(s) for s in self._shapes])

    @property
    def output_classes(self):
        return _fmt(self._structure, [SparseTensor if s else Tensor for s in self._sparse])

    def __repr__(self):
        return f"<tv.data.Iterator '{self.name}' types={self.output_types}>"


class _FeedableIterator:
    """``Iterator.from_string_handle``: reads whichever iterator the fed handle names."""

    def __init__(self, handle, structure_, dtypes, shapes):
        from ...framework.tensor_conversion import convert_to_tensor
        self._handle = convert_to_tensor(handle, dtype=_dt.string)
        self._structure, self._dtypes, self._shapes = structure_, tuple(dtypes), tuple(shapes)
        self._sparse = _sparse_of(structure_, len(self._dtypes))

    def get_next(self, name=None):
        """The next element of the iterator the handle names."""
        op = apply_op("IteratorGetNextFromStringHandle", [self._handle],
                      {"dtypes": self._dtypes, "shapes": self._shapes,
                       "sparse": self._sparse}, name=name or "IteratorGetNext")
        return pack_as(self._structure, pack_outputs(list(op.outputs), self._sparse, self._shapes))

    output_types = Iterator.output_types
    output_shapes = Iterator.output_shapes
    output_classes = Iterator.output_classes

    def __repr__(self):
        return f"<tv.data.Iterator (feedable) types={self.output_types}>"


# ---- get_next_as_optional and tf.data.experimental.Optional ----------------------------------

def _empty_values(spec) -> tuple:
    """The outputs of an element-less optional: arrays of the components' dtypes and static
    shapes (unknown dims 0; a sparse component: an empty SparseTensorValue of its rank)."""
    out = []
    for d, s, sp in zip(spec["dtypes"], spec["shapes"], spec.get("sparse") or
                        (False,) * len(spec["dtypes"])):
        np_dt = np.dtype(object) if d.is_string else d.np_dtype
        if sp:
            rank = 0 if s is None else len(s)
            out.append(SparseTensorValue(np.zeros((0, rank), np.int64), np.zeros(0, np_dt),
                                         np.array([0 if x is None else x for x in (s or ())],
                                                  np.int64)))
        else:
            out.append(np.full(tuple(0 if x is None else x for x in (s or ())),
                               "" if d.is_string else 0, dtype=np_dt))
    return tuple(out)


def _next_optional_kernel(ctx, *inputs, iterator, stage=None):
    st = _state(ctx, iterator)
    if stage is not None and st.gen is None:
        st.initialize(stage, inputs, ctx)
    try:
        got, has = st.get_next(ctx), True
    except OutOfRangeError:
        got, has = _empty_values(iterator), False
    out = _outputs(iterator, got)
    return (np.asarray(has),) + (out if isinstance(out, tuple) else (out,))


def _optional_get_kernel(has, *values):
    if not bool(np.asarray(has)):
        raise InvalidArgumentError("The given optional does not have a value.")
    return values[0] if len(values) == 1 else values


register_op("IteratorGetNextAsOptional",
            lambda i, a: [(_dt.bool_, ())] + _get_next_shape(i, a), _next_optional_kernel,
            stateful=True, needs_ctx=True, differentiable=False)
register_op("OptionalGetValue", lambda i, a: [(t.dtype, t._shape) for t in i[1:]],
            _optional_get_kernel, differentiable=False)


class Optional:
    """``tf.data.experimental.Optional``: an element that may be absent. ``has_value()`` is a
    bool tensor; ``get_value()`` the element's tensors (in its structure), which fail with
    ``InvalidArgumentError`` when run on an empty optional. Made by
    ``tv.data.experimental.get_next_as_optional(iterator)`` (one element read per run, an
    empty optional at the end of the data instead of ``OutOfRangeError``),
    :meth:`from_value` or :meth:`empty`."""

    def __init__(self, has_value, values, structure_, dtypes, shapes, sparse):
        self._has = has_value
        self._values = list(values)  # op outputs: three per sparse component
        self._structure, self._dtypes = structure_, tuple(dtypes)
        self._shapes, self._sparse = tuple(shapes), tuple(sparse)

    def has_value(self, name=None) -> Tensor:
        """A bool scalar tensor: whether the optional holds an element."""
        return self._has

    def get_value(self, name=None):
        """The element, as tensors in its structure (``InvalidArgumentError`` when run on an
        empty optional)."""
        g = self._has.graph
        with g.as_default():
            op = apply_op("OptionalGetValue", [self._has] + self._values, {},
                          name=name or "OptionalGetValue")
        return pack_as(self._structure, pack_outputs(list(op.outputs), self._sparse,
                                                     self._shapes))

    output_types = Iterator.output_types
    output_shapes = Iterator.output_shapes
    output_classes = Iterator.output_classes

    @staticmethod
    def from_value(value) -> Optional:
        """An optional holding ``value`` (a structure of tensors and SparseTensors)."""
        from ..array.array_ops import constant
        from .dataset_ops import _normalize, _shape_of
        from .dataset_transforms import _expand

        def conv(x):
            if isinstance(x, (SparseTensor, SparseTensorValue)):
                return SparseTensor.from_value(x)
            from ...framework.tensor_conversion import convert_to_tensor
            return convert_to_tensor(x)
        s = _normalize(value, conv)
        flat = flatten(s)
        return Optional(constant(True), _expand(flat), s, [t.dtype for t in flat],
                        [_shape_of(t) for t in flat], [isinstance(t, SparseTensor) for t in flat])

    @staticmethod
    def empty(element_spec) -> Optional:
        """An optional without a value, of ``element_spec``'s structure: leaves with a
        ``dtype`` and a ``shape`` (tensors, SparseTensors, or TF's TensorSpec-like objects;
        a leaf whose class is named SparseTensor or SparseTensorSpec is sparse)."""
        from ..array.array_ops import constant
        from .dataset_ops import _normalize
        s = _normalize(element_spec, lambda x: x)
        leaves = flatten(s)
        dtypes = [_dt.as_dtype(x.dtype) for x in leaves]
        shapes = [None if TensorShape(x.shape).dims is None else tuple(TensorShape(x.shape).dims)
                  for x in leaves]
        sparse = [isinstance(x, SparseTensor) or type(x).__name__ == "SparseTensorSpec"
                  for x in leaves]
        spec = {"dtypes": dtypes, "shapes": shapes, "sparse": sparse}
        values = expand_outputs(_empty_values(spec), sparse)
        return Optional(constant(False), [constant(v) for v in values],
                        pack_as(s, [SPARSE if sp else 0 for sp in sparse]), dtypes, shapes,
                        sparse)

    def __repr__(self):
        return f"<tv.data.experimental.Optional types={self.output_types}>"


def get_next_as_optional(iterator) -> Optional:
    """``tf.data.experimental.get_next_as_optional(iterator)``: the next element as an
    :class:`Optional` (empty at the end of the data); each run reads one element."""
    inputs, attrs = [], {}
    if iterator._one_shot is not None:
        attrs["stage"], inputs = iterator._one_shot
    op = iterator._apply("IteratorGetNextAsOptional", inputs, attrs, "IteratorGetNextAsOptional")
    return Optional(op.outputs[0], list(op.outputs[1:]), iterator._structure, iterator._dtypes,
                    iterator._shapes, iterator._sparse)
