"""The synchronous-training protocol as pure state machines: events in, decisions out, no I/O.

Two machines, each held as a resource on a parameter-server device by
:mod:`tensorvm.train.sync_replicas` (the thin shell that turns ops into these calls and waits
on a condition where a call says "not yet"):

* :class:`GradientAccumulator` (one per PS device per optimizer): workers ``apply`` gradients
  tagged with the global step they were computed at. A gradient of an older step is dropped
  (``"stale"``); the first ``num_required`` of the current step are kept, later ones of the
  same step are dropped (``"surplus"``: with backup workers they are the stragglers). The
  chief's ``take`` returns their average once there are ``num_required`` of them and moves the
  accumulator to the next step. Sparse gradients (indices, values) are concatenated and
  deduplicated (summed per row) at ``take``. A replica counts once per step: a second gradient
  of the same replica for the same step (its step re-run after its worker was lost, the first
  gradient already accepted) is dropped (``"duplicate"``), so no replica's gradient is averaged
  in twice. A gradient may instead carry a *step token* (the
  :class:`~tensorvm.train.ClusterCoordinator`'s closures, whose replicas are not tied to a
  worker): a token accepted once, in this step or an earlier one, is a duplicate for good (the
  last :data:`TOKEN_MEMORY` accepted tokens are remembered), so a closure run again on another
  worker after its first run's gradient arrived adds nothing. ``accepted`` and ``taken`` count
  the gradients kept and the steps handed to the chief. Every ``set_step`` and every completed ``take`` starts a new *generation*; a take
  still waiting from an older generation (the loop of a chief that was replaced) gives up with
  ``AbortedError`` instead of resetting the step under the new chief.
* :class:`TokenGate`: the chief ``release``\\ s step ``s`` with ``tokens`` tokens (one per
  replica); a worker whose last gradient was for step ``L`` waits until a release newer than
  ``L`` has a token left, takes one and goes on at the released step. This is TF's token
  queue, with one difference: a release replaces the tokens of older releases instead of
  queueing behind them, so a worker never takes an old token and computes a gradient that is
  stale before it starts (with TF's FIFO of tokens, leftovers from backup workers pile up).
  The chief's (re)start is a ``restart``: workers waiting when it comes (their gradients were
  dropped with the accumulator's reset) are let go at the restart's step, even a worker whose
  last gradient was for that very step — with a plain release it would wait for ever.

>>> acc = GradientAccumulator(num_required=2, kinds=("dense",))
>>> acc.set_step(0)
>>> acc.apply(0, [np.array([1.0])]), acc.apply(0, [np.array([3.0])]), acc.apply(0, [np.array([9.0])])
('accepted', 'accepted', 'surplus')
>>> acc.take(0)[0].tolist(), acc.step, acc.apply(0, [np.array([1.0])])
([2.0], 1, 'stale')
>>> gate = TokenGate()
>>> gate.set_step(0); gate.try_take(0) is None
True
>>> gate.release(1, tokens=2); gate.try_take(0), gate.try_take(0), gate.try_take(0)
(1, 1, None)
"""
from __future__ import annotations

import numpy as np

from ..framework.errors import AbortedError, InvalidArgumentError, OutOfRangeError

ACCEPTED, STALE, SURPLUS, AHEAD, DUPLICATE = "accepted", "stale", "surplus", "ahead", \
    "duplicate"
TOKEN_MEMORY = 1 << 16  # accepted step tokens an accumulator remembers (a FIFO)


class GradientAccumulator:
    """Gradients of one step for a group of variables (``kinds``: "dense" or "sparse" each).

    ``apply(local_step, grads, replica, token)`` with ``grads[i]`` an array (dense) or
    ``(indices, values)`` (sparse) -> a decision, or None (wait) until the chief has set the
    step (``token``: the gradient's step token, ``b""`` or None for none: then ``replica``
    counts once per step); ``take(step, since)`` -> the averages in the same layout, or None while fewer than
    ``num_required`` were accepted (``since``: the generation the waiting take began in).
    """

    def __init__(self, num_required: int, kinds: tuple):
        if num_required < 1:
            raise InvalidArgumentError(f"replicas_to_aggregate must be >= 1, got {num_required}")
        self.num_required = int(num_required)
        self.kinds = tuple(kinds)
        self.step: int | None = None  # None until the chief sets it (a fresh PS)
        self.closed = False
        self._grads: list = []
        self._replicas: set = set()  # the replicas whose gradient of this step was accepted
        self.generation = 0  # bumped by set_step and by every completed take
        self.dropped = {STALE: 0, SURPLUS: 0, AHEAD: 0, DUPLICATE: 0}
        self.accepted = 0  # gradients kept (each averaged into exactly one taken step)
        self.taken = 0  # steps handed to the chief
        self._tokens: dict = {}  # accepted step tokens (insertion order: the oldest first)

    def set_step(self, step: int) -> None:
        """The chief's (re)start: accept gradients of ``step`` from now on (reopens)."""
        self.step = int(step)
        self.closed = False
        self._grads = []
        self._replicas = set()
        self.generation += 1

    def close(self) -> None:
        """Training ended: a waiting ``take`` fails with OutOfRangeError."""
        self.closed = True

    def apply(self, local_step: int, grads: list, replica=None, token: bytes | None = None
              ) -> str:
        if self.step is None:  # a fresh PS (started, or replaced after a loss): wait for
            if self.closed:  # the chief to set the step (its chief_init_op)
                raise OutOfRangeError("the gradient accumulator was closed (training ended)")
            return None
        if len(grads) != len(self.kinds):
            raise InvalidArgumentError(f"accumulator expects {len(self.kinds)} gradients, "
                                       f"got {len(grads)}")
        local_step = int(local_step)
        if local_step < self.step:
            self.dropped[STALE] += 1
            return STALE
        if local_step > self.step:  # computed before a restore moved the step back
            self.dropped[AHEAD] += 1
            return AHEAD
        if token:  # a closure's gradient: once for good, whichever worker computed it
            if token in self._tokens:
                self.dropped[DUPLICATE] += 1
                return DUPLICATE
        elif replica is not None and replica in self._replicas:
            self.dropped[DUPLICATE] += 1
            return DUPLICATE
        if len(self._grads) >= self.num_required:
            self.dropped[SURPLUS] += 1
            return SURPLUS
        self._grads.append(list(grads))
        self.accepted += 1
        if token:
            self._tokens[token] = None
            if len(self._tokens) > TOKEN_MEMORY:
                del self._tokens[next(iter(self._tokens))]
        elif replica is not None:
            self._replicas.add(replica)
        return ACCEPTED

    def ready(self) -> bool:
        return self.step is not None and len(self._grads) >= self.num_required

    def take(self, step: int, since: int | None = None):
        """The averaged gradients of ``step`` (then the accumulator moves to ``step + 1``), or
        None if fewer than ``num_required`` arrived yet. ``since``: the :attr:`generation` a
        waiting take saw first; if the accumulator was reset or taken since, this take is from
        a replaced chief loop: AbortedError."""
        if since is not None and since != self.generation:
            raise AbortedError(
                f"the gradient accumulator moved on (reset or taken since; now at step {self.step}) "
                f"while a take of step {step} waited: that take's chief loop was replaced")
        if self.step is None or int(step) != self.step:
            self.set_step(step)  # the chief's view of the step wins (e.g. after a restore)
        if not self.ready():
            if self.closed:
                raise OutOfRangeError("the gradient accumulator was closed (training ended)")
            return None
        n = len(self._grads)
        out = []
        for i, kind in enumerate(self.kinds):
            parts = [g[i] for g in self._grads]
            if kind == "dense":
                out.append(np.sum(np.stack(parts), axis=0) / np.asarray(n, parts[0].dtype))
            else:
                out.append(dedupe(np.concatenate([np.asarray(p[0]) for p in parts]),
                                  np.concatenate([np.asarray(p[1]) for p in parts]), n))
        self.step += 1
        self.taken += 1
        self._grads = []
        self._replicas = set()
        self.generation += 1
        return out


def dedupe(indices: np.ndarray, values: np.ndarray, divide_by: int = 1):
    """Rows summed per distinct index (sorted), divided by ``divide_by``.

    >>> i, v = dedupe(np.array([3, 1, 3]), np.array([[1.0], [2.0], [4.0]]))
    >>> i.tolist(), v.tolist()
    ([1, 3], [[2.0], [5.0]])
    """
    uniq, inv = np.unique(indices, return_inverse=True)
    out = np.zeros((len(uniq),) + values.shape[1:], values.dtype)
    np.add.at(out, inv.reshape(-1), values)
    if divide_by != 1:
        out /= np.asarray(divide_by, values.dtype)
    return uniq.astype(indices.dtype, copy=False), out


class TokenGate:
    """Releases workers after each applied step (see the module docstring)."""

    def __init__(self):
        self.step: int | None = None
        self.tokens = 0
        self.closed = False
        self.restarts = 0  # bumped by every restart

    def set_step(self, step: int) -> None:
        """The chief's (re)start: step ``step`` is current and has no tokens yet."""
        self.step, self.tokens, self.closed = int(step), 0, False

    def release(self, step: int, tokens: int) -> None:
        self.step, self.tokens, self.closed = int(step), int(tokens), False

    def restart(self, step: int, tokens: int) -> None:
        """The chief's (re)start at ``step``: a release that also lets go the workers waiting
        now (``try_take(..., since)`` with an older ``since``), whatever their step."""
        self.release(step, tokens)
        self.restarts += 1

    def close(self) -> None:
        """Training ended: a waiting worker fails with OutOfRangeError."""
        self.closed = True

    def try_take(self, local_step: int, since: int | None = None) -> int | None:
        """The step to go on at, or None: wait for a newer release. A worker whose step is
        ahead of the gate's (its state outlived a restore) goes on at the gate's step; one
        that began waiting before a restart (``since``: :attr:`restarts` then) goes on at the
        restart's step even if it equals its own."""
        restarted = since is not None and since != self.restarts
        if self.step is None or self.tokens <= 0 or \
                (int(local_step) == self.step and not restarted):
            if self.closed:
                raise OutOfRangeError("the token gate was closed (training ended)")
            return None
        self.tokens -= 1
        return self.step
