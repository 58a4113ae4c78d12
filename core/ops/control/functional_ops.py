"""TF 1.x's higher-order functions over the first dimension of tensors: ``map_fn``, ``foldl``,
``foldr`` and ``scan``, built as TF builds them — the inputs unstacked into
:class:`~tensorvm.TensorArray` s, one ``tv.while_loop`` that applies ``fn`` to element ``i``
and writes its result to an output TensorArray, and the outputs stacked. So they run as one
loop op in one task (``tensorvm.ops.control.while_loop``), and their gradients are the loop's and the
arrays' gradients (``back_prop=False`` builds a loop without a tape).

``elems`` (and ``initializer``, and ``map_fn``'s ``dtype``) may be nested lists, tuples,
namedtuples and dicts of tensors; ``fn`` gets and returns the same structure (TF's ``nest``
rules; dict keys in sorted order). ``parallel_iterations`` and ``swap_memory`` are accepted
(iterations run one after another in the loop's task).

>>> import tensorvm as tv
>>> x = tv.constant([1.0, 2.0, 3.0])
>>> with tv.Session() as s:
...     [v.tolist() for v in s.run([tv.map_fn(lambda v: v * v, x),
...                                 tv.foldl(lambda a, v: a + v, x),
...                                 tv.scan(lambda a, v: a + v, x)])]
[[1.0, 4.0, 9.0], 6.0, [1.0, 3.0, 6.0]]
"""
from __future__ import annotations

from ...framework import dtypes as _dt
from ...framework.graph import Tensor, get_default_graph
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import constant, shape as _shape_of
from .control_flow_ops import flatten, pack_as, structure, while_loop
from .tensor_array import TensorArray

__all__ = ["map_fn", "foldl", "foldr", "scan"]


def _is_nested(x) -> bool:
    return isinstance(x, (list, tuple, dict))


def _fn_name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _check_callable(fn, what: str):
    if not callable(fn):
        if what == "map_fn":
            raise TypeError(f"The provided function {_fn_name(fn)} is not callable."
                            "fn must be callable.")
        raise TypeError(f"{_fn_name(fn)} is not callable. Please provide a callable "
                        "function.")


def _untyped(s):
    """``structure`` with lists and tuples alike (TF's nesting check, before its type check)."""
    if isinstance(s, tuple) and s and s[0] in ("list", "tuple"):
        return ("seq", tuple(_untyped(v) for v in s[1]))
    if isinstance(s, tuple) and s and s[0] == "dict":
        return ("dict", tuple((k, _untyped(v)) for k, v in s[1]))
    return s


def _assert_same_structure(want, got):
    """TF's ``nest.assert_same_structure``: a different nesting is ValueError, the same
    nesting with a list where a tuple is expected (or the reverse) TypeError."""
    a, b = structure(want), structure(got)
    if a == b:
        return
    cls = TypeError if _untyped(a) == _untyped(b) else ValueError
    raise cls("The two structures don't have the same nested structure.\n\n"
              f"First structure: {_describe(want)}\n\n"
              f"Second structure: {_describe(got)}")


def _describe(s):
    if isinstance(s, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(s[k])}" for k in sorted(s)) + "}"
    if isinstance(s, list):
        return "[" + ", ".join(_describe(v) for v in s) + "]"
    if isinstance(s, tuple):
        return "(" + ", ".join(_describe(v) for v in s) + ("," if len(s) == 1 else "") + ")"
    return "."


def _leading(elems_flat, what):
    """The number of elements (a Python int when static, else an int32 tensor) and its
    static value (or None); every input must agree on it."""
    first = elems_flat[0]
    if first._shape is not None and len(first._shape) < 1:
        raise ValueError("Elements in elems must be 1+ dimensional Tensors, not scalars")
    n_static = None if first._shape is None else first._shape[0]
    for t in elems_flat[1:]:
        if t._shape is not None and len(t._shape) < 1:
            raise ValueError(f"Shape {_tf_shape(t._shape)} must have rank at least 1")
        m = None if t._shape is None else t._shape[0]
        if n_static is not None and m is not None and m != n_static:
            raise ValueError(f"Dimensions {n_static} and {m} are not compatible")
        n_static = m if n_static is None else n_static
    n = n_static if n_static is not None else _shape_of(first, out_type=_dt.int32)[0]
    return n, n_static


def _tf_shape(s) -> str:
    return "(" + ", ".join("None" if d is None else str(d) for d in s) + \
        ("," if len(s) == 1 else "") + ")"


def _set_leading(t: Tensor, n_static):
    """Give a stacked result its static leading dimension (TF's ``set_shape``)."""
    if n_static is not None and t._shape is not None and t._shape and t._shape[0] is None:
        t._shape = (n_static,) + tuple(t._shape[1:])
    return t


def _stacked(ta, n, n_static):
    """``ta.stack()``, its leading dimension set; when the element count is only known at run
    time and may be 0, an empty array of the element shape the writes inferred (TF 1.x's
    zero-size stack) — a ``cond`` around the stack."""
    es = ta._meta.element_shape
    if n_static is None and es is not None and None not in es:
        from .control_flow_ops import cond
        from ..array.fill_ops import zeros
        from ..math.math_ext import greater
        return cond(greater(n, 0), ta.stack, lambda: zeros((0,) + tuple(es), ta.dtype))
    return _set_leading(ta.stack(), n_static)


def _unstacked(elems_flat, n, element_shapes=False):
    tas = []
    for e in elems_flat:
        es = None if not element_shapes or e._shape is None else e._shape[1:]
        tas.append(TensorArray(e.dtype, size=n, dynamic_size=False, infer_shape=True,
                               element_shape=es).unstack(e))
    return tas


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True,
           swap_memory=False, infer_shape=True, name=None, fn_output_signature=None):
    """``fn`` applied to each element of ``elems`` unstacked on dimension 0, the results
    stacked (TF 1.x's ``tf.map_fn``). ``dtype`` (or ``fn_output_signature``) gives the
    dtypes (a structure of them) of ``fn``'s result when they differ from ``elems``'.

    >>> import tensorvm as tv
    >>> a, b = tv.constant([1, 2]), tv.constant([10, 20])
    >>> with tv.Session() as s:
    ...     s.run(tv.map_fn(lambda xy: xy[0] * xy[1], (a, b), dtype=tv.int32)).tolist()
    [10, 40]
    """
    if fn_output_signature is None:
        fn_output_signature = dtype
    _check_callable(fn, "map_fn")
    if not parallel_iterations:
        parallel_iterations = 10
    elems_leaves = flatten(elems)
    if not elems_leaves:
        raise ValueError("elems must be a Tensor or (possibly nested) sequence of Tensors. "
                         f"Got {elems}, which does not contain any Tensors.")
    if fn_output_signature is None:
        out_struct = elems
    else:
        out_struct = fn_output_signature
    g = get_default_graph()
    with g.name_scope(name or "map"):
        elems_flat = [convert_to_tensor(t, name="elem") for t in elems_leaves]
        n, n_static = _leading(elems_flat, "map_fn")
        elems_ta = _unstacked(elems_flat, n)
        if fn_output_signature is None:
            out_specs = [(t.dtype, None if t._shape is None else t._shape[1:])
                         for t in elems_flat]
        else:
            out_specs = [(_dt.as_dtype(d), None) for d in flatten(fn_output_signature)]
        acc_ta = [TensorArray(dt, size=n, dynamic_size=False, infer_shape=infer_shape)
                  for dt, _ in out_specs]

        def compute(i, tas):
            value = pack_as(elems, [ta.read(i) for ta in elems_ta])
            result = fn(value)
            if _is_nested(out_struct) or _is_nested(result):
                _assert_same_structure(out_struct, result)
            flat = flatten(result)
            if len(flat) != len(tas):
                _assert_same_structure(out_struct, result)
            flat = [_as_dtype(v, ta.dtype, "map_fn") for v, ta in zip(flat, tas)]
            return i + 1, [ta.write(i, v) for ta, v in zip(tas, flat)]

        _, r_a = while_loop(lambda i, _: i < n, compute, (constant(0), acc_ta),
                            parallel_iterations=parallel_iterations, back_prop=back_prop,
                            swap_memory=swap_memory, maximum_iterations=n)
        results = [_stacked(r, n, n_static) for r in r_a]
    return pack_as(out_struct, results)


def _as_dtype(v, dtype, what):
    if isinstance(v, Tensor) or hasattr(v, "_as_graph_element"):
        t = convert_to_tensor(v)
        if t.dtype != dtype:
            raise TypeError(f"{what}: fn returned a {t.dtype.name} tensor ({t.name}) where "
                            f"{dtype.name} is expected; pass dtype= (or "
                            "fn_output_signature=) with the dtypes fn returns")
        return t
    return convert_to_tensor(v, dtype)


def _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name,
          reverse: bool):
    what = "foldr" if reverse else "foldl"
    _check_callable(fn, what)
    g = get_default_graph()
    with g.name_scope(name or what):
        elems_flat = [convert_to_tensor(e, name="elem") for e in flatten(elems)]
        n, _ = _leading(elems_flat, what)
        tas = _unstacked(elems_flat, n)

        def read(i):
            return pack_as(elems, [ta.read(i) for ta in tas])

        if initializer is None:
            i = (n - 1) if reverse else 1
            a = read(n - 1 if reverse else 0)
        else:
            i = n if reverse else 0
            a = initializer
        i = convert_to_tensor(i, _dt.int32) if not isinstance(i, Tensor) else i

        if reverse:
            def body(i, a):
                i -= 1
                return [i, fn(a, read(i))]
            cond = lambda i, a: i > 0
        else:
            def body(i, a):
                return [i + 1, fn(a, read(i))]
            cond = lambda i, a: i < n

        _, r_a = while_loop(cond, body, [i, a], parallel_iterations=parallel_iterations,
                            back_prop=back_prop, swap_memory=swap_memory,
                            maximum_iterations=n)
    return r_a


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """``fn(...fn(fn(initializer, elems[0]), elems[1])..., elems[n-1])`` (TF 1.x's
    ``tf.foldl``); without ``initializer`` the fold starts from ``elems[0]``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     int(s.run(tv.foldl(lambda a, x: a * 10 + x, tv.constant([1, 2, 3]))))
    123
    """
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name,
                 reverse=False)


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """``fn(...fn(fn(initializer, elems[n-1]), elems[n-2])..., elems[0])`` (TF 1.x's
    ``tf.foldr``); without ``initializer`` the fold starts from ``elems[n-1]``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     int(s.run(tv.foldr(lambda a, x: a * 10 + x, tv.constant([1, 2, 3]))))
    321
    """
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name,
                 reverse=True)


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
         swap_memory=False, infer_shape=True, reverse=False, name=None):
    """Every intermediate value of a ``foldl`` (``foldr`` if ``reverse``), stacked: result
    ``[i] = fn(result[i - 1], elems[i])`` (TF 1.x's ``tf.scan``). Without ``initializer``,
    ``result[0] = elems[0]``; with one, ``fn``'s accumulator has ``initializer``'s structure,
    which may differ from ``elems``'.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.scan(lambda a, x: a * x, tv.constant([1, 2, 3, 4]), reverse=True)).tolist()
    [24, 24, 12, 4]
    """
    _check_callable(fn, "scan")
    in_seq = _is_nested(elems)

    def in_flat(x):
        return flatten(x) if in_seq else [x]

    def in_pack(x):
        return pack_as(elems, x) if in_seq else x[0]

    if initializer is None:
        out_seq, out_flat, out_pack = in_seq, in_flat, in_pack
    else:
        out_seq = _is_nested(initializer)

        def out_flat(x):
            return flatten(x) if out_seq else [x]

        def out_pack(x):
            return pack_as(initializer, x) if out_seq else x[0]

    g = get_default_graph()
    with g.name_scope(name or "scan"):
        elems_flat = [convert_to_tensor(e, name="elem") for e in in_flat(elems)]
        n, n_static = _leading(elems_flat, "scan")
        elems_ta = _unstacked(elems_flat, n, element_shapes=True)
        if initializer is None:
            a_flat = [ta.read(n - 1 if reverse else 0) for ta in elems_ta]
            i = 1
        else:
            a_flat = [convert_to_tensor(a) for a in out_flat(initializer)]
            i = 0
        accs_ta = [TensorArray(a.dtype, size=n, dynamic_size=False, infer_shape=infer_shape,
                               element_shape=a._shape if infer_shape else None)
                   for a in a_flat]
        if initializer is None:
            accs_ta = [ta.write(n - 1 if reverse else 0, a) for ta, a in zip(accs_ta, a_flat)]

        def compute(i, a_flat, tas):
            packed = in_pack([ta.read(i) for ta in elems_ta])
            a_out = fn(out_pack(a_flat), packed)
            want = elems if initializer is None else initializer
            if _is_nested(want) or _is_nested(a_out):
                _assert_same_structure(want, a_out)
            flat = [_as_dtype(v, a.dtype, "scan") for v, a in zip(out_flat(a_out), a_flat)]
            tas = [ta.write(i, v) for ta, v in zip(tas, flat)]
            return (i - 1 if reverse else i + 1), flat, tas

        if reverse:
            initial_i = n - 1 - i
            cond = lambda i, _1, _2: i >= 0
        else:
            initial_i = i
            cond = lambda i, _1, _2: i < n
        initial_i = convert_to_tensor(initial_i, _dt.int32) \
            if not isinstance(initial_i, Tensor) else initial_i
        _, _, r_a = while_loop(cond, compute, (initial_i, a_flat, accs_ta),
                               parallel_iterations=parallel_iterations, back_prop=back_prop,
                               swap_memory=swap_memory, maximum_iterations=n)
        results = [_stacked(r, n, n_static) for r in r_a]
    return out_pack(results)


def vectorized_map(fn, elems, fallback_to_while_loop=True, warn=True):
    """``fn`` applied to each element of ``elems`` (unstacked on dimension 0), the results
    stacked — TF's ``tf.vectorized_map``, run as TF runs it when ``fn`` cannot be vectorised:
    a :func:`map_fn` loop, whose output dtypes are read from ``fn`` traced on the first
    element (so ``dtype=`` is never needed).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.vectorized_map(lambda r: tv.reduce_sum(r) > 2, tv.constant([[1, 1], [2, 3]]))
    ...           ).tolist()
    [False, True]
    """
    _check_callable(fn, "map_fn")
    leaves = flatten(elems)
    if not leaves:
        raise ValueError("elems must be a Tensor or (possibly nested) sequence of Tensors. "
                         f"Got {elems}, which does not contain any Tensors.")
    g = get_default_graph()
    with g.name_scope("vectorized_map"):
        flat = [convert_to_tensor(t, name="elem") for t in leaves]
        with g.name_scope("signature"):  # traced once for its dtypes: never run
            probe = fn(pack_as(elems, [t[0] for t in flat]))
        sig = pack_as(probe, [convert_to_tensor(t).dtype for t in flatten(probe)])
        return map_fn(fn, pack_as(elems, flat), fn_output_signature=sig)


__all__ += ["vectorized_map"]
