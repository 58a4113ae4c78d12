"""Fused optimizer updates (TF's ``training_ops``): one stateful op per variable update.

``GradientDescentOptimizer`` used to build ``var.assign_sub(lr * grad)``: a Mul that allocates
``lr * grad`` and an AssignSub that allocates ``var - that``. ``ApplyGradientDescent`` computes
the same two float operations, in the same order (so the same bits), in one op.
``ApplyMomentum`` does the same for Momentum's accumulator and variable under both locks;
``ApplyAdagrad`` and ``ApplyAdam`` for Adagrad's accumulator and Adam's two moments (their
unfused graphs' arithmetic in its order: the same bits, tested against the unfused graphs).

Each update writes into the variable's own buffer, and into its slots' (accumulators,
moments), when nothing else holds that value (:func:`~tensorvm.ops.state.state_ops.sole_holder`:
no fetched result, no reader's step in flight); a value someone holds stays a snapshot and the
update goes to a fresh array (copy on write, see
:class:`tensorvm.ops.state.state_ops.VariableState`). Either way the arithmetic runs block by block
(:data:`_CHUNK` elements) through small temporaries that stay in cache, never a variable-sized
one, with the same float operations per element as the unfused graph: the same bits.

>>> import numpy as np, tensorvm as tv
>>> w = tv.Variable(np.array([1.0, 2.0], np.float32))
>>> step = apply_gradient_descent(w, 0.5, tv.constant([2.0, 4.0]))
>>> with tv.Session() as s:
...     _ = s.run(w.initializer); s.run(step).tolist()
[0.0, 0.0]
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .state_ops import _value_shape, _var, sole_holder

__all__: list[str] = []


def _check(op, v, cur, name, arr):
    if arr.shape != cur.shape:
        raise InvalidArgumentError(
            f"{op}: {name} of shape {list(arr.shape)} does not match variable {v.name!r} of "
            f"shape {list(cur.shape)}")


def _scalar_shape(op_type, t, what):
    if t._shape is not None and len(t._shape) != 0:
        raise InvalidArgumentError(f"{op_type}: {what} must be a scalar, got shape "
                                   f"{list(t._shape)}")


# ---- in place or copy on write, block by block ----------------------------------------------
_CHUNK = 1 << 16  # elements per block of an update (its temporaries: small, in cache)


def _target(arr, alone):
    """The array an update of ``arr`` writes: ``arr`` itself, made writeable, when nothing
    else holds it (``alone``: :func:`~tensorvm.ops.state.state_ops.sole_holder`, asked by the
    kernel of its own local) and it is one contiguous buffer; else a fresh array (copy on
    write: whoever holds the old value keeps it). Every update reads an element of ``arr``
    before it writes that element, so writing into ``arr`` gives the copy's bits."""
    if alone and arr.flags.c_contiguous:
        arr.flags.writeable = True
        return arr
    return array_namespace(arr).empty(arr.shape, arr.dtype)


def _seal(arr):
    """Make a value written by an update read-only again (how a variable stores it)."""
    if isinstance(arr, np.ndarray):
        arr.flags.writeable = False


def _flat(x):
    """``x`` flattened in C order: a view of a contiguous array (a copy of a strided one)."""
    return x.reshape(-1)


def _blocks(flat):
    """Slices of ``flat`` of :data:`_CHUNK` elements; one slice for a device array (one
    launch per operation)."""
    n = flat.size
    step = _CHUNK if type(flat) is np.ndarray else max(n, 1)
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _temp(flat):
    """A temporary of one block's size (of the whole array on a device)."""
    n = min(_CHUNK, flat.size) if type(flat) is np.ndarray else flat.size
    return array_namespace(flat).empty(n, flat.dtype)


# ---- gradient descent ------------------------------------------------------------------------
def _gd_shape(inputs, attrs):
    alpha, delta = inputs
    _scalar_shape("ApplyGradientDescent", alpha, "alpha")
    if alpha.dtype != attrs["dtype"]:
        raise InvalidArgumentError(
            f"ApplyGradientDescent: alpha is {alpha.dtype.name} but variable "
            f"{attrs['var_name']!r} is {attrs['dtype'].name}")
    return _value_shape([delta], attrs)


def _gd_kernel(ctx, alpha, delta, *, var_name, container, dtype, shape):
    v = _var(ctx, var_name, container, dtype, shape)
    with v.lock:
        cur = v.read()
        _check("ApplyGradientDescent", v, cur, "delta", delta)
        alone = sole_holder(cur)  # (a statement of its own: no other reference on the stack)
        new = _target(cur, alone)
        try:
            if cur.size <= _CHUNK:  # one block: no slicing (a small variable's step)
                t = array_namespace(cur).empty(cur.shape, cur.dtype)
                np.multiply(alpha, delta, out=t)  # the old Mul(lr, grad) ...
                np.subtract(cur, t, out=new)  # ... then AssignSub(var, that)
            else:
                d, c, o = _flat(delta), _flat(cur), _flat(new)
                tmp = _temp(o)
                for s in _blocks(o):
                    t = tmp[:s.stop - s.start]
                    np.multiply(alpha, d[s], out=t)
                    np.subtract(c[s], t, out=o[s])
        finally:
            _seal(new)
        return v.set(new)


register_op("ApplyGradientDescent", _gd_shape, _gd_kernel, stateful=True, needs_ctx=True,
            differentiable=False, waits="never")


def apply_gradient_descent(var, alpha, delta, name=None):
    """``var -= alpha * delta`` as one op (TF's ``ApplyGradientDescent``); returns the new
    value. ``alpha`` is a scalar of the variable's dtype, ``delta`` the variable's shape."""
    g = var._build_graph()
    with g.as_default():
        alpha = convert_to_tensor(alpha, dtype=var.dtype)
        delta = convert_to_tensor(delta, dtype=var.dtype)
    return var._update("ApplyGradientDescent", delta, name or "ApplyGradientDescent",
                       extra=(alpha,))


# ---- momentum --------------------------------------------------------------------------------
def _momentum_shape(inputs, attrs):
    lr, grad, momentum = inputs
    for t, what in ((lr, "lr"), (momentum, "momentum")):
        _scalar_shape("ApplyMomentum", t, what)
        if t.dtype != attrs["dtype"]:
            raise InvalidArgumentError(
                f"ApplyMomentum: {what} is {t.dtype.name} but variable "
                f"{attrs['var_name']!r} is {attrs['dtype'].name}")
    return _value_shape([grad], attrs)


def _momentum_kernel(ctx, lr, grad, momentum, *, var_name, container, dtype, shape,
                     accum_name, use_nesterov=False):
    v = _var(ctx, var_name, container, dtype, shape)
    acc = _var(ctx, accum_name, container, dtype, shape)
    with acc.lock, v.lock:  # always the accumulator first: one order, no deadlock
        a, cur = acc.read(), v.read()
        _check("ApplyMomentum", v, cur, "grad", grad)
        _check("ApplyMomentum", acc, a, "grad", grad)
        a_alone, alone = sole_holder(a), sole_holder(cur)
        new_acc, new = _target(a, a_alone), _target(cur, alone)
        try:
            g, af, cf, naf, nf = _flat(grad), _flat(a), _flat(cur), _flat(new_acc), _flat(new)
            tmp = _temp(nf)
            # the unfused graph's float operations, in its order
            for s in _blocks(nf):
                na, t = naf[s], tmp[:s.stop - s.start]
                np.multiply(af[s], momentum, out=na)  # accum = accum * momentum + grad
                np.add(na, g[s], out=na)
                if use_nesterov:  # var -= lr * (grad + momentum * accum)
                    np.multiply(momentum, na, out=t)
                    np.add(g[s], t, out=t)
                    np.multiply(lr, t, out=t)
                else:  # var -= lr * accum
                    np.multiply(lr, na, out=t)
                np.subtract(cf[s], t, out=nf[s])
        finally:
            _seal(new_acc)
            _seal(new)
        acc.set(new_acc)
        return v.set(new)


register_op("ApplyMomentum", _momentum_shape, _momentum_kernel, stateful=True,
            needs_ctx=True, differentiable=False, waits="never")


def apply_momentum(var, accum, lr, grad, momentum, use_nesterov=False, name=None):
    """TF's ``ApplyMomentum`` as one op: ``accum = accum * momentum + grad``, then ``var -=
    lr * accum`` (or ``lr * (grad + momentum * accum)`` with ``use_nesterov``); both
    variables on one device (the accumulator is a slot colocated with ``var``). Returns
    the variable's new value."""
    g = var._build_graph()
    if accum.device != var.device or accum._attrs["container"] != var._attrs["container"]:
        raise InvalidArgumentError(
            f"ApplyMomentum: accumulator {accum.name!r} must live with variable {var.name!r}")
    with g.as_default():
        lr = convert_to_tensor(lr, dtype=var.dtype)
        momentum = convert_to_tensor(momentum, dtype=var.dtype)
        grad = convert_to_tensor(grad, dtype=var.dtype)
    with g.as_default(), g.colocate_with(var.op):
        from ...framework.op_def_library import apply_op
        attrs = dict(var._attrs, accum_name=accum._attrs["var_name"],
                     use_nesterov=bool(use_nesterov))
        return apply_op("ApplyMomentum", [lr, grad, momentum], attrs,
                        name=name or "ApplyMomentum",
                        colocation=var.op.colocation).outputs[0]


# ---- adagrad / adam --------------------------------------------------------------------------
def _scalars_shape(op_type, names):
    def shape_fn(inputs, attrs):
        for t, what in zip(inputs, names):
            if what is None:
                continue
            _scalar_shape(op_type, t, what)
            if t.dtype != attrs["dtype"]:
                raise InvalidArgumentError(
                    f"{op_type}: {what} is {t.dtype.name} but variable "
                    f"{attrs['var_name']!r} is {attrs['dtype'].name}")
        grad = inputs[names.index(None)]
        return _value_shape([grad], attrs)
    return shape_fn


def _adagrad_kernel(ctx, lr, grad, *, var_name, container, dtype, shape, accum_name):
    v = _var(ctx, var_name, container, dtype, shape)
    acc = _var(ctx, accum_name, container, dtype, shape)
    with acc.lock, v.lock:  # the accumulator first, as ApplyMomentum
        a, cur = acc.read(), v.read()
        _check("ApplyAdagrad", v, cur, "grad", grad)
        _check("ApplyAdagrad", acc, a, "grad", grad)
        a_alone, alone = sole_holder(a), sole_holder(cur)
        new_acc, new = _target(a, a_alone), _target(cur, alone)
        try:
            g, af, cf, naf, nf = _flat(grad), _flat(a), _flat(cur), _flat(new_acc), _flat(new)
            tmp, root = _temp(nf), _temp(nf)
            # the unfused graph's operations in its order: acc += grad * grad;
            # var -= lr * grad / sqrt(acc)
            for s in _blocks(nf):
                k = s.stop - s.start
                na, gs, t, r = naf[s], g[s], tmp[:k], root[:k]
                np.square(gs, out=t)  # grad * grad: the same rounding, one stream
                np.add(af[s], t, out=na)
                np.multiply(lr, gs, out=t)
                np.sqrt(na, out=r)
                np.divide(t, r, out=t)
                np.subtract(cf[s], t, out=nf[s])
        finally:
            _seal(new_acc)
            _seal(new)
        acc.set(new_acc)
        return v.set(new)


register_op("ApplyAdagrad", _scalars_shape("ApplyAdagrad", ("lr", None)), _adagrad_kernel,
            stateful=True, needs_ctx=True, differentiable=False, waits="never")


def _adam_kernel(ctx, lr_t, grad, beta1, beta2, epsilon, *, var_name, container, dtype,
                 shape, m_name, v_name):
    var = _var(ctx, var_name, container, dtype, shape)
    ms = _var(ctx, m_name, container, dtype, shape)
    vs = _var(ctx, v_name, container, dtype, shape)
    with ms.lock, vs.lock, var.lock:  # one order: m, v, then the variable
        m, v, cur = ms.read(), vs.read(), var.read()
        _check("ApplyAdam", var, cur, "grad", grad)
        _check("ApplyAdam", ms, m, "grad", grad)
        _check("ApplyAdam", vs, v, "grad", grad)
        m_alone, v_alone, alone = sole_holder(m), sole_holder(v), sole_holder(cur)
        m_new, v_new, new = _target(m, m_alone), _target(v, v_alone), _target(cur, alone)
        try:
            g, mf, vf, cf = _flat(grad), _flat(m), _flat(v), _flat(cur)
            nmf, nvf, nf = _flat(m_new), _flat(v_new), _flat(new)
            tmp, den = _temp(nf), _temp(nf)
            one = beta1.dtype.type(1)
            omb1, omb2 = np.subtract(one, beta1), np.subtract(one, beta2)
            for s in _blocks(nf):
                k = s.stop - s.start
                nm, nv, gs, t, dn = nmf[s], nvf[s], g[s], tmp[:k], den[:k]
                # m = b1 * m + (1 - b1) * grad
                np.multiply(beta1, mf[s], out=nm)
                np.multiply(omb1, gs, out=t)
                np.add(nm, t, out=nm)
                # v = b2 * v + (1 - b2) * grad * grad
                np.multiply(beta2, vf[s], out=nv)
                np.multiply(omb2, gs, out=t)
                np.multiply(t, gs, out=t)
                np.add(nv, t, out=nv)
                # var -= lr_t * m / (sqrt(v) + eps)
                np.sqrt(nv, out=dn)
                np.add(dn, epsilon, out=dn)
                np.multiply(lr_t, nm, out=t)
                np.divide(t, dn, out=t)
                np.subtract(cf[s], t, out=nf[s])
        finally:
            _seal(m_new)
            _seal(v_new)
            _seal(new)
        ms.set(m_new)
        vs.set(v_new)
        return var.set(new)


register_op("ApplyAdam",
            _scalars_shape("ApplyAdam", ("lr_t", None, "beta1", "beta2", "epsilon")),
            _adam_kernel, stateful=True, needs_ctx=True, differentiable=False, waits="never")


def _slot_attrs(op_type, var, slots):
    for s in slots:
        if s.device != var.device or s._attrs["container"] != var._attrs["container"]:
            raise InvalidArgumentError(
                f"{op_type}: slot {s.name!r} must live with variable {var.name!r}")


def apply_adagrad(var, accum, lr, grad, name=None):
    """TF's ``ApplyAdagrad`` as one op: ``accum += grad * grad``, then ``var -= lr * grad /
    sqrt(accum)`` (the unfused graph's operations, in its order: the same bits). Returns the
    variable's new value."""
    from ...framework.op_def_library import apply_op
    g = var._build_graph()
    _slot_attrs("ApplyAdagrad", var, [accum])
    with g.as_default():
        lr = convert_to_tensor(lr, dtype=var.dtype)
        grad = convert_to_tensor(grad, dtype=var.dtype)
    with g.as_default(), g.colocate_with(var.op):
        attrs = dict(var._attrs, accum_name=accum._attrs["var_name"])
        return apply_op("ApplyAdagrad", [lr, grad], attrs, name=name or "ApplyAdagrad",
                        colocation=var.op.colocation).outputs[0]


def apply_adam(var, m, v, lr_t, beta1, beta2, epsilon, grad, name=None):
    """Adam's dense update as one op, given the bias-corrected step ``lr_t = lr * sqrt(1 -
    beta2^t) / (1 - beta1^t)``: ``m = beta1 * m + (1 - beta1) * grad``, ``v = beta2 * v + (1 -
    beta2) * grad * grad``, ``var -= lr_t * m / (sqrt(v) + epsilon)`` (the unfused graph's
    operations in its order: the same bits). Returns the variable's new value."""
    from ...framework.op_def_library import apply_op
    g = var._build_graph()
    _slot_attrs("ApplyAdam", var, [m, v])
    with g.as_default():
        ins = [convert_to_tensor(t, dtype=var.dtype)
               for t in (lr_t, grad, beta1, beta2, epsilon)]
    with g.as_default(), g.colocate_with(var.op):
        attrs = dict(var._attrs, m_name=m._attrs["var_name"], v_name=v._attrs["var_name"])
        return apply_op("ApplyAdam", ins, attrs, name=name or "ApplyAdam",
                        colocation=var.op.colocation).outputs[0]
