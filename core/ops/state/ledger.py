"""Step-token ledgers: the state behind :func:`tensorvm.train.exactly_once.exactly_once`.

A ledger lives on one parameter-server device as two ordinary variables, so the Saver checkpoints
it with the variables it guards and a restore gives back both together:

* ``tokens`` — a string vector of ``capacity`` slots, a ring of the tokens applied (``""``: an
  empty slot);
* ``state`` — int64 ``[applied, dropped, cursor]``: the claims that applied, the claims that
  were dropped as twins, and how many tokens the ring has taken (the next slot is ``cursor %
  capacity``).

``LedgerClaim(token)`` decides, under both variables' locks, whether the step holding this
token may apply its updates on this device: true the first time the ledger sees the token (it
is written into the ring), false for a twin (the token is in the ring: ``dropped`` counts it),
and true always for the empty token (no deduplication; ``applied`` counts it). The ring is
bounded: once ``capacity`` tokens were taken, each new one overwrites the oldest, which is
forgotten (a twin arriving after ``capacity`` newer tokens is applied again).

Finding a token is a dict lookup: each ledger keeps an index of its ring (a resource beside the
variables, rebuilt when the ring's array is not the one it indexed: after the initializer or a
restore assigned a new one). The ring is written in place when nothing else holds its value
(:func:`~tensorvm.ops.state.state_ops.sole_holder`), else copied (a save reading it keeps its
snapshot).

The claim's other inputs (``deps``) are not read: they make it wait until every value its
guarded updates need has arrived on the device, so a step that dies before its gradients
arrive has claimed nothing (see :mod:`tensorvm.train.exactly_once`).

Each step of a multi-step run claims its own token: the claim uses ``token + b"#" + k`` for the
``k``-th time it runs in one session step (``run(..., steps=K)`` runs the K steps of a plan
under one step id, so they claim ``#0`` .. ``#K-1``; :func:`per_step_token`); ``b""`` stays
``b""``. The count restarts with every ``session.run`` (a new step id), so a run fed the same
token again — the twin of a step whose worker was lost, on another worker — claims the same K
tokens, in the same order where the K steps run one after another (the direct data plane; on
Dask's unrolled K steps each claims one of the K, whichever order they run in). It is counted
where the claim runs, on the PS: the fed token goes there as it is, and the worker's stage
gets no extra op.

>>> import numpy as np, tensorvm as tv
>>> tokens = tv.Variable(tv.zeros([2], tv.string), trainable=False, name="tokens")
>>> state = tv.Variable(np.zeros(3, np.int64), trainable=False, name="state")
>>> tok = tv.placeholder(tv.string, [])
>>> claim = ledger_claim(tokens, state, tok)
>>> with tv.Session() as s:
...     _ = s.run([tokens.initializer, state.initializer])
...     [bool(s.run(claim, {tok: t})) for t in (b"a", b"a", b"", b"b", b"c", b"a")]
...     s.run(state).tolist()
[True, False, True, True, True, True]
[5, 1, 4]
"""
from __future__ import annotations

import weakref

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .state_ops import _var, sole_holder

__all__: list[str] = []

APPLIED, DROPPED, CURSOR = 0, 1, 2  # the fields of a ledger's ``state`` variable


class _Index:
    """A ledger's ring as a dict token -> slot, and the array it was built from (weakly: a
    reference would keep the ring from being written in place)."""

    __slots__ = ("source", "slots")

    def __init__(self):
        self.source = None
        self.slots: dict[bytes, int] = {}

    def of(self, ring: np.ndarray) -> dict[bytes, int]:
        if self.source is None or self.source() is not ring:
            flat = ring.reshape(-1)
            used = np.flatnonzero(flat.astype(bool))  # (truth of each slot, in C)
            self.slots = {_as_bytes(flat[i]): int(i) for i in used}
            self.source = weakref.ref(ring)
        return self.slots


def _as_bytes(v) -> bytes:
    return v if type(v) is bytes else v.encode() if isinstance(v, str) else bytes(v)


def token_bytes(token, op_name: str = "LedgerClaim") -> bytes:
    """A fed step token as bytes; anything but a scalar string is InvalidArgumentError."""
    v = token
    if isinstance(v, np.ndarray):
        if v.shape != ():
            raise InvalidArgumentError(f"{op_name}: the step token must be a scalar string, got "
                                       f"an array of shape {list(v.shape)}")
        v = v.item()
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode()
    raise InvalidArgumentError(f"{op_name}: the step token must be a scalar string (bytes or "
                               f"str), got {type(v).__name__} {v!r}")


def _claim_kernel(ctx, token, *deps, tokens_name, state_name, container, capacity):
    tok = per_step_token(ctx, token_bytes(token, ctx.op_name))
    ring_var = _var(ctx, tokens_name, container, _dt.string, (capacity,))
    state_var = _var(ctx, state_name, container, _dt.int64, (3,))
    index = ctx.resources.lookup_or_create(container, tokens_name + "/index", _Index)
    with ring_var.lock, state_var.lock:
        state = state_var.read().copy()
        if not tok:  # no token: no deduplication
            state[APPLIED] += 1
            state_var.set(state)
            return np.bool_(True)
        cur = ring_var.read()
        slots = index.of(cur)
        if tok in slots:
            state[DROPPED] += 1
            state_var.set(state)
            return np.bool_(False)
        alone = sole_holder(cur)  # (a statement of its own: no other reference on the stack)
        ring = cur if alone else cur.copy()
        ring.flags.writeable = True
        pos = int(state[CURSOR]) % capacity
        old = ring[pos]
        if old:
            slots.pop(_as_bytes(old), None)
        ring[pos] = tok
        slots[tok] = pos
        ring_var.set(ring)  # read-only again
        index.source = weakref.ref(ring)
        state[APPLIED] += 1
        state[CURSOR] += 1
        state_var.set(state)
        return np.bool_(True)


class _Seq:
    """The runs of one op per step id (the latest :data:`SEQ_STEPS` steps)."""

    __slots__ = ("lock", "counts")

    def __init__(self):
        import collections
        import threading
        self.lock = threading.Lock()
        self.counts: collections.OrderedDict = collections.OrderedDict()

    def next(self, step_id) -> int:
        with self.lock:
            k = self.counts.pop(step_id, 0)
            self.counts[step_id] = k + 1
            while len(self.counts) > SEQ_STEPS:
                self.counts.popitem(last=False)
            return k


SEQ_STEPS = 256  # step ids an op's count remembers (steps in flight on one device at once)


def per_step_token(ctx, tok: bytes) -> bytes:
    """``tok#k`` for the ``k``-th run of ``ctx``'s op in ``ctx``'s session step (see the
    module docstring); ``b""`` stays ``b""``."""
    if not tok:
        return tok
    seq = ctx.resources.lookup_or_create("", ctx.op_name + "/seq", _Seq)
    return b"%s#%d" % (tok, seq.next(ctx.step_id))


def _claim_shape(inputs, attrs):
    token = inputs[0]
    if token.dtype != _dt.string:
        raise InvalidArgumentError(f"LedgerClaim: the step token must be a string tensor, got "
                                   f"{token.dtype.name} ({token.name})")
    if token._shape not in (None, ()):
        raise InvalidArgumentError(f"LedgerClaim: the step token must be a scalar, got shape "
                                   f"{list(token._shape)} ({token.name})")
    return [(_dt.bool_, ())]


# gpu="same": the kernel reads only the (host) token and the ledger's host variables; its
# other inputs are never touched, so a GPU device's values are not copied for it.
# commits=True: once a token is recorded, a cancellation of the step (a timeout, another
# device's failure) does not stop the updates it gates halfway (OpDef.commits).
register_op("LedgerClaim", _claim_shape, _claim_kernel, stateful=True, needs_ctx=True,
            differentiable=False, waits="never", gpu="same", commits=True)


def ledger_claim(tokens, state, token, deps=(), name=None):
    """``LedgerClaim``: whether the step of ``token`` may apply its updates here (see the
    module docstring). ``tokens``/``state``: the ledger's variables, ``deps``: tensors the
    claim waits for without reading them. Colocated with ``tokens``."""
    g = tokens.graph
    with g.as_default():
        token = convert_to_tensor(token)
        cap = tokens.shape.dims
        if cap is None or len(cap) != 1 or cap[0] is None or cap[0] < 1:
            raise InvalidArgumentError(f"ledger_claim: the ring {tokens.name} must be a vector "
                                       f"of a known length, got shape {cap}")
        if state.dtype != _dt.int64 or tuple(state.shape.dims or ()) != (3,):
            raise InvalidArgumentError(f"ledger_claim: the state {state.name} must be int64 of "
                                       f"shape [3]")
        attrs = {"tokens_name": tokens.op.name, "state_name": state.op.name,
                 "container": tokens._attrs["container"], "capacity": int(cap[0])}
        with g.colocate_with(tokens.op):
            return apply_op("LedgerClaim", [token, *deps], attrs, name=name or "LedgerClaim",
                            colocation=tokens.op.colocation).outputs[0]
