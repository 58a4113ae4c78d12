"""Products of tensors: ``einsum`` (with ``...``, its gradient an einsum again),
``tensordot`` and the ``cross`` product.
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ..common import check_same_dtype

__all__ = ["einsum", "tensordot", "cross"]


# ---- einsum, tensordot -------------------------------------------------------------------------
def _explicit_equation(equation: str, ranks) -> str:
    """``equation`` with ``...`` spelled out in letters and the output made explicit (NumPy's
    implicit rule: the letters that appear once, in alphabetical order, after the ellipsis)."""
    import string
    eq = equation.replace(" ", "")
    lhs, out = eq.split("->") if "->" in eq else (eq, None)
    subs = lhs.split(",")
    if len(subs) != len(ranks):
        raise InvalidArgumentError(f"Einsum: the equation {equation!r} names {len(subs)} "
                                   f"operands, got {len(ranks)} inputs")
    for sub in subs + ([out] if out is not None else []):
        bad = [c for c in sub.replace("...", "") if not c.isalpha()]
        if bad:
            raise InvalidArgumentError(f"Einsum: invalid character {bad[0]!r} in {equation!r}")
    ell = 0
    if "..." in eq:
        for sub, r in zip(subs, ranks):
            if "..." in sub:
                if r is None:
                    raise InvalidArgumentError(f"Einsum {equation!r}: an operand with '...' "
                                               "needs a known rank")
                ell = max(ell, r - (len(sub) - 3))
    free = [c for c in string.ascii_letters if c not in eq][:ell]
    done = []
    for sub, r in zip(subs, ranks):
        if "..." in sub:
            n = r - (len(sub) - 3)
            sub = sub.replace("...", "".join(free[ell - n:]))
        done.append(sub)
    if out is None:
        counts = {}
        for sub in done:
            for c in sub:
                counts[c] = counts.get(c, 0) + 1
        out = "".join(free) + "".join(sorted(c for c, k in counts.items()
                                             if k == 1 and c not in free))
    else:
        out = out.replace("...", "".join(free))
    return ",".join(done) + "->" + out


def _einsum_shape(inputs, attrs):
    lhs, out = attrs["equation"].split("->")
    subs = lhs.split(",")
    dt = check_same_dtype(inputs, "Einsum") if inputs else None
    sizes: dict[str, int | None] = {}
    for k, (sub, t) in enumerate(zip(subs, inputs)):
        if t._shape is None:
            continue
        if len(sub) != len(t._shape):
            raise InvalidArgumentError(f"Einsum: input {k} has rank {len(t._shape)} but its "
                                       f"subscripts {sub!r} name {len(sub)} axes "
                                       f"({attrs['equation']!r})")
        for c, d in zip(sub, t._shape):
            have = sizes.get(c)
            if d is not None and have is not None and have != d and 1 not in (have, d):
                raise InvalidArgumentError(
                    f"Einsum: axis {c!r} has size {have} in one operand and {d} in another "
                    f"({attrs['equation']!r})")
            if d is not None and (have is None or have == 1):
                sizes[c] = d
    if any(c not in lhs for c in out):
        raise InvalidArgumentError(f"Einsum: output subscript not in the inputs "
                                   f"({attrs['equation']!r})")
    return [(dt, tuple(sizes.get(c) for c in out))]


def _einsum_kernel(*xs, equation):
    return np.einsum(equation, *xs, optimize=len(xs) > 1)


def _einsum_grad(op, g):
    from ..array.array_ops import ones_like
    from ..array.fill_ops import eye
    lhs, out = op.attrs["equation"].split("->")
    subs = lhs.split(",")
    grads = []
    for i, (sub, x) in enumerate(zip(subs, op.inputs)):
        others = [(s, t) for j, (s, t) in enumerate(zip(subs, op.inputs)) if j != i]
        have = set(out) | {c for s, _ in others for c in s}
        uniq = "".join(dict.fromkeys(sub))
        terms, operands = [out] + [s for s, _ in others], [g] + [t for _, t in others]
        if any(c not in have for c in uniq):  # axes summed in this operand only
            terms.append(sub)
            operands.append(ones_like(x))
        gu = einsum(",".join(terms) + "->" + uniq, *operands)
        if len(uniq) != len(sub):  # a repeated axis (a diagonal): spread back with eyes
            import string
            fresh = iter(c for c in string.ascii_letters if c not in op.attrs["equation"])
            target, eyes, seen = [], [], set()
            for k, c in enumerate(sub):
                if c in seen:
                    n = x._shape[k] if x._shape is not None else None
                    if n is None:
                        raise InvalidArgumentError("Einsum gradient: a repeated axis needs a "
                                                   "known size")
                    z = next(fresh)
                    target.append(z)
                    eyes.append((c + z, eye(n, dtype=x.dtype)))
                else:
                    seen.add(c)
                    target.append(c)
            gu = einsum(",".join([uniq] + [e for e, _ in eyes]) + "->" + "".join(target),
                        gu, *[t for _, t in eyes])
        grads.append(gu)
    return grads


register_op("Einsum", _einsum_shape, _einsum_kernel, grad=_einsum_grad)


def einsum(equation, *inputs, **kwargs):
    """Einstein summation (NumPy's ``np.einsum`` notation, ``...`` and implicit outputs
    included; TF's ``tf.einsum``), with gradients.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.einsum("ij,jk->ik", [[1.0, 2.0]], [[3.0], [4.0]])).tolist()
    [[11.0]]
    """
    from ...framework.tensor_conversion import convert_to_tensor
    from ..common import _convert_pair
    name = kwargs.pop("name", None)
    kwargs.pop("optimize", None)
    if kwargs:
        raise TypeError(f"Invalid keyword arguments for this function: "
                        f"{', '.join(sorted(kwargs))}. Expected: name, optimize")
    if len(inputs) == 2:
        xs = list(_convert_pair(*inputs))
    else:
        xs = [convert_to_tensor(x) for x in inputs]
    ranks = [None if t._shape is None else len(t._shape) for t in xs]
    eq = _explicit_equation(str(equation), ranks)
    return apply_op("Einsum", xs, {"equation": eq}, name=name).outputs[0]


def tensordot(a, b, axes, name=None):
    """Sum of products over ``axes`` (TF's ``tf.tensordot``): an int ``N`` (the last N axes of
    ``a`` with the first N of ``b``) or a pair of axis lists; an einsum of the two.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     float(s.run(tv.tensordot([1.0, 2.0], [3.0, 4.0], 1)))
    11.0
    """
    import string
    from ..common import _convert_pair
    a, b = _convert_pair(a, b)
    ra, rb = (None if t._shape is None else len(t._shape) for t in (a, b))
    if ra is None or rb is None:
        raise InvalidArgumentError("tensordot needs inputs of known rank")
    if isinstance(axes, (int, np.integer)) or (hasattr(axes, "ndim") and np.ndim(axes) == 0):
        n = int(axes)
        if n < 0:
            raise ValueError(f"`axes` must be at least 0. Received: {n}.")
        if n > ra or n > rb:
            t, r = (a, ra) if n > ra else (b, rb)
            raise ValueError(f"`axes` must not be larger than the number of dimensions of "
                             f"tensor {t}.  Received {n}, vs tensor dimensions {r}.")
        ax_a, ax_b = list(range(ra - n, ra)), list(range(n))
    else:
        if len(axes) != 2:
            raise ValueError(f"'axes' must be an int or have length 2, got {axes}")
        ax_a, ax_b = ([int(v) for v in np.atleast_1d(x)] for x in axes)
        if len(ax_a) != len(ax_b):
            raise ValueError(f"Different number of contraction axes `a` and `b`, "
                             f"{len(ax_a)} != {len(ax_b)}.")
    ax_a = [x % ra for x in ax_a]
    ax_b = [x % rb for x in ax_b]
    letters = iter(string.ascii_letters)
    sa = [next(letters) for _ in range(ra)]
    sb = [next(letters) for _ in range(rb)]
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in ax_a] + \
        [c for k, c in enumerate(sb) if k not in ax_b]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b, name=name)


def _cross_shape(inputs, attrs):
    a, b = inputs
    dt = check_same_dtype(inputs, "Cross")
    for t in (a, b):
        if t._shape is not None and (not t._shape or t._shape[-1] not in (None, 3)):
            raise InvalidArgumentError(f"Cross: the last dimension must be 3, got shape "
                                       f"{list(t._shape)}")
    if a._shape is not None and b._shape is not None and (len(a._shape) != len(b._shape) or any(
            x is not None and y is not None and x != y for x, y in zip(a._shape, b._shape))):
        raise InvalidArgumentError(f"Cross: a and b must have the same shape, got "
                                   f"{list(a._shape)} and {list(b._shape)}")
    return [(dt, a._shape if a._shape is not None else b._shape)]


def _cross_kernel(a, b):
    return np.cross(a, b)


register_op("Cross", _cross_shape, _cross_kernel,
            grad=lambda op, g: [cross(op.inputs[1], g), cross(g, op.inputs[0])])


def cross(a, b, name=None):
    """The cross product of the 3-vectors in the last dimension of ``a`` and ``b`` (same
    shapes), as TF's ``tf.cross``/``tf.linalg.cross``."""
    from ..common import _convert_pair
    a, b = _convert_pair(a, b)
    return apply_op("Cross", [a, b], name=name).outputs[0]
