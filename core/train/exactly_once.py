"""``tv.train.exactly_once``: each step's variable updates applied at most once per step token.

TF 2's ``ClusterCoordinator`` re-runs a step whose worker was lost, so a gradient that already
reached the parameter server can be applied twice ("function execution is not atomic"). Here a
step carries a *token* (a string fed to :attr:`ExactlyOnce.token`); each parameter-server device
applies a token's updates at most once and counts the twins it drops::

    with tv.train.exactly_once() as once:
        train_op = opt.minimize(loss, global_step=gs)
    sess.run(train_op, {once.token: b"step-17"})   # applied
    sess.run(train_op, {once.token: b"step-17"})   # a twin: nothing changes, dropped += 1
    sess.run(train_op)                             # the default b"": always applied
    sess.run(once.counters())                      # applied 2, dropped 1

Design
------
*What is guarded.* Every variable update created inside the block (a stateful op that writes a
variable: the optimizer's fused apply ops with their slots, scatter updates, Adam's beta-power
updates, the global step's increment, a moving average's assign), except updates of local
variables (``LOCAL_VARIABLES``: a worker's own state, such as ``cycling_batch``'s input position
or a metric, which a re-run on another worker does not share), the initializers of variables
made in the block and a Saver's restore assigns.

*Regions.* At the block's exit the guarded ops, with the ops between them (descendants of one
guarded op that another needs), are cut into regions by device (the variable's device; an op
with none: the session's default) and by *level*: an op's level is the largest of its inputs'
in this set, plus one across a device. A region therefore only waits for regions of lower
levels, and never for a value of its own level from elsewhere: with one PS everything is one
region; with several, the global step's increment (which waits for every PS's updates) is a
region of level 1 on its device.

*One region, one ledger, one decision.* Each region gets a ledger on its device
(:mod:`tensorvm.ops.state.ledger`: two variables, so the Saver checkpoints it with what it
guards) and a ``LedgerClaim`` of the step's token. The claim waits for every value the region
needs from outside it (its inputs are those tensors, unread, and its control inputs the
region's outside control inputs): it runs in the same task as the updates, after the step's
gradients have arrived, so a step that dies before they arrive has claimed nothing, and a PS
that dies after the claim loses its ledger and its variables together. The claim's result
gates the region TF's way (:mod:`tensorvm.ops.control.control_flow_ops`): ``Switch(claim,
claim)``, each guarded op waits on the true side's pivot, so a dropped twin's updates are
*dead* and never run — no state changes, not "a zero gradient applied". A ``Merge`` of "the
region ran" and the false side's pivot is live either way: every control edge leaving the
region (the global step's increment on another PS, the ``group`` that ``minimize`` returns, a
read made in the block after the step) waits on it instead, so one PS dropping its part does not
stop another PS from applying its own (a step re-run after it reached only some PS is completed,
each part once). Inside the block ``minimize(..., global_step=gs)`` returns a ``NoOp`` after the
increment rather than the increment itself, so ops made after the block that wait on
``train_op`` run for a twin too. The claim *commits* (``OpDef.commits``): once it has recorded
the token, a cancellation of the step (its timeout, another device's failure) no longer stops
that stage, so the region's updates run whole or not at all.

*Bounds.* A ledger remembers the last ``capacity`` distinct tokens it applied (default
:data:`DEFAULT_CAPACITY`, 2**20); an older twin is applied again. Tokens need only be distinct
per step (the coordinator's step ids); ``b""`` disables deduplication.

*Checkpoints.* The ledger is two variables in ``GLOBAL_VARIABLES``: a Saver made after the
block saves and restores them with the model, so a PS restored from a checkpoint forgets the
tokens applied after that checkpoint, exactly those whose updates it forgot, when the checkpoint
was taken between steps (a save while steps are in flight reads each variable at its own
moment, as TF's async checkpoints do: a step in flight may be in the ledger but not in every
variable, or the reverse).

*Costs and limits.* A claim costs about 12 us (a dict lookup and a ring slot written in
place), and a PS stage holding a gate runs the interpreter's dead-aware loop instead of
straight-line code (measured in process: +80 us a step for a stage of 50 variables' updates).
The ledger's ops hold string tensors, which have no GPU kernels: a guarded variable on a GPU
device is placed on its task's CPU with them (its colocation group moves as a whole; untested
on a GPU). ``run(..., steps=K)`` fed one token gives each of its K steps its own (``token#0`` ..
``token#K-1``, counted by each claim over the step's iterations:
:func:`~tensorvm.ops.state.ledger.per_step_token`), so all K apply
once, and a twin run fed the same token drops exactly those of its K steps whose first runs
applied. A data edge (not a control edge) from one region into
another carries a dropped region's deadness with it, and so does a control edge made after the
block onto a guarded op itself. An update kernel that raises after its region's claim leaves the
token recorded (a bug to fix, not a twin to re-run).

>>> import numpy as np, tensorvm as tv
>>> with tv.Graph().as_default():
...     w = tv.Variable(np.float32(1.0), name="w")
...     with tv.train.exactly_once() as once:
...         train = tv.train.GradientDescentOptimizer(0.25).minimize(w * w)
...     with tv.Session() as s:
...         _ = s.run(tv.global_variables_initializer())
...         for t in (b"a", b"a", b"b"):
...             _ = s.run(train, {once.token: t})
...         float(s.run(w)), {k: int(v) for k, v in s.run(once.counters()).items()}
(0.25, {'applied': 2, 'dropped': 1})
"""
from __future__ import annotations

import threading
from collections import deque

import numpy as np

from ..framework import dtypes as _dt
from ..framework.device_spec import DeviceSpec
from ..framework.errors import InvalidArgumentError
from ..framework.graph import get_default_graph
from ..framework.graph_keys import GraphKeys
from ..ops.array.array_ops import identity, placeholder_with_default
from ..ops.array.fill_ops import zeros
from ..ops.control.control_flow_ops import merge, switch
from ..ops.state import ledger as _ledger
from ..ops.state.variables import Variable

__all__ = ["exactly_once", "ExactlyOnce", "DEFAULT_CAPACITY"]

LOCAL_VARIABLES = GraphKeys.LOCAL_VARIABLES
DEFAULT_CAPACITY = 1 << 20  # tokens a ledger remembers (a ring: the oldest is forgotten)
_OPEN = threading.local()  # the blocks open in this thread, by graph (nesting is refused)


class ExactlyOnce:
    """An ``exactly_once`` block (see the module docstring).

    ``token``: the scalar string placeholder (default ``b""``: no deduplication) to feed with
    each step's token; ``ledgers``: ``(tokens, state)`` variables per region, once the block
    has closed; ``capacity``: the tokens each ledger remembers. :meth:`counters` and
    :meth:`report` count what the ledgers decided."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, name: str = "exactly_once",
                 graph=None):
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or \
                capacity < 1:
            raise InvalidArgumentError(f"exactly_once: capacity must be a positive integer, got "
                                       f"{capacity!r}")
        self.capacity = int(capacity)
        self._name = name
        self._graph = graph
        self.token = None
        self.ledgers: list[tuple[Variable, Variable]] = []  # (tokens, state) per region
        self._closed = False
        self._counters = None

    # ---- the block -----------------------------------------------------------------------
    def __enter__(self) -> "ExactlyOnce":
        g = self._graph = self._graph or get_default_graph()
        open_ = _open_blocks()
        if id(g) in open_:
            raise InvalidArgumentError(
                "exactly_once blocks cannot be nested: one is already open on this graph "
                f"(token {open_[id(g)].token.name}); every update inside the outer block is "
                "already guarded by its token")
        if self.token is not None:
            raise InvalidArgumentError("exactly_once: this block was already used; make a new "
                                       "one")
        with g.as_default(), g.control_dependencies(None), g.name_scope(None), \
                g.name_scope(self._name) as scope:
            self._scope = scope
            self.token = placeholder_with_default(
                np.asarray(b"", dtype=object), [], name="token")
        self._start = len(g.get_operations())
        open_[id(g)] = self
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        g = self._graph
        _open_blocks().pop(id(g), None)
        self._closed = True
        if exc_type is not None:
            return
        created = g.get_operations()[self._start:]
        with g.as_default(), g.control_dependencies(None), g.name_scope(self._scope):
            self.ledgers = _guard(g, created, self.token, self.capacity)
            if self.ledgers:  # now, while the graph may still grow (before it is finalized)
                self._counters = self._count()

    # ---- counting --------------------------------------------------------------------------
    def counters(self) -> dict:
        """``{"applied": int64 tensor, "dropped": int64 tensor}``: the claims that applied and
        the twins dropped, summed over the block's ledgers (one per PS device the updates
        touch; two on the global step's device when they span several devices, so a twin
        dropped on two PS devices counts 2). Fetch it with ``session.run``."""
        if not self._closed:
            raise InvalidArgumentError("exactly_once: counters() is built after the block "
                                       "has closed (its ledgers are made at its exit)")
        if not self.ledgers:
            raise InvalidArgumentError(
                "exactly_once: counters() outside any PS: no variable update was created "
                "inside the block, so it has no ledger to count")
        return dict(self._counters)

    def _count(self) -> dict:
        from ..ops.math.math_ops import add_n
        with self._graph.name_scope("counters"):
            parts = [s.value() for _, s in self.ledgers]
            total = parts[0] if len(parts) == 1 else add_n(parts)
            return {"applied": identity(total[_ledger.APPLIED], name="applied"),
                    "dropped": identity(total[_ledger.DROPPED], name="dropped")}

    def report(self, session) -> dict:
        """Fetch :meth:`counters` and send them to the running job's progress display and
        dashboard page (``tv.job.report``: ``exactly_once_applied``, ``exactly_once_dropped``;
        a no-op outside a ``tensorvm`` job). Returns the values as ints."""
        from ..runtime.job_api import report
        got = {k: int(v) for k, v in session.run(self.counters()).items()}
        report(exactly_once_applied=got["applied"], exactly_once_dropped=got["dropped"])
        return got

    def __repr__(self):
        return (f"<tv.train.exactly_once token={getattr(self.token, 'name', None)} "
                f"ledgers={len(self.ledgers)} capacity={self.capacity}>")


def exactly_once(capacity: int = DEFAULT_CAPACITY, name: str = "exactly_once",
                 graph=None) -> ExactlyOnce:
    """A block whose variable updates each PS device applies at most once per fed step
    token (see the module docstring)."""
    return ExactlyOnce(capacity, name, graph)


def is_open(graph) -> bool:
    """Whether an ``exactly_once`` block is open on ``graph`` in this thread (its updates
    will be guarded when it closes)."""
    return id(graph) in _open_blocks()


def _open_blocks() -> dict:
    if not hasattr(_OPEN, "blocks"):
        _OPEN.blocks = {}
    return _OPEN.blocks


# ---- the rewrite ---------------------------------------------------------------------------

def _is_update(op, made_vars: set, local: set, inits: set) -> bool:
    """A variable update to guard: stateful, writes a variable that is not a local variable
    (``local``: per-worker state, such as input positions and metrics), not a variable's
    initializer (``inits``, or ``<var>/Assign`` made right after a variable made in the block
    and kept in no collection) nor a Saver's restore."""
    if not op.stateful or op.op_def.reads_only or "var_name" not in op.attrs or \
            op.type in ("VariableV2", "VariableRefFetch") or op in inits:
        return False
    var = op.attrs["var_name"]
    if var in local:
        return False
    if op.type == "Assign" and var in made_vars and op.name == f"{var}/Assign":
        return False
    return not any(t.op.type == "RestoreShard" for t in op.inputs)


def _preds(op) -> list:
    return [t.op for t in op.inputs] + list(op.control_inputs)


def _device_key(op, g, memo: dict) -> str:
    """The device an op will be placed on, as far as the graph says: its colocation group's
    root's device, else its own, else "" (the session's default)."""
    key = memo.get(op.name)
    if key is None:
        memo[op.name] = ""  # (a colocation cycle reads as the default)
        root = None
        if op.colocation and op.colocation != op.name:
            try:
                root = g.get_operation_by_name(op.colocation)
            except Exception:  # noqa: BLE001 - a root outside the graph: the op's own device
                root = None
        if root is not None:
            key = _device_key(root, g, memo) or _spec(op.device)
        else:
            key = _spec(op.device)
        memo[op.name] = key
    return key


def _spec(device: str) -> str:
    return DeviceSpec.parse(device).to_string() if device else ""


def _regions(g, guarded: list) -> tuple[dict, dict]:
    """The set between guarded ops (their descendants that a guarded op needs), cut into
    regions: ``(region key -> ops in graph order, op -> region key)``; a key is ``(device,
    level)``."""
    consumers: dict = {}
    for op in g.get_operations():
        for p in _preds(op):
            consumers.setdefault(p, []).append(op)
    below, todo = set(guarded), deque(guarded)  # descendants of guarded ops
    while todo:
        for c in consumers.get(todo.popleft(), ()):
            if c not in below:
                below.add(c)
                todo.append(c)
    between, todo = set(guarded), deque(guarded)  # ...that a guarded op needs
    while todo:
        for p in _preds(todo.popleft()):
            if p in below and p not in between:
                between.add(p)
                todo.append(p)
    order = _topological(between)
    memo: dict = {}
    level: dict = {}
    where: dict = {}
    regions: dict = {}
    for op in order:
        dev = _device_key(op, g, memo)
        lvl = 0
        for p in _preds(op):
            if p in between:
                lvl = max(lvl, level[p] + (where[p][0] != dev))
        level[op] = lvl
        where[op] = (dev, lvl)
        regions.setdefault((dev, lvl), []).append(op)
    return regions, where


def _topological(ops: set) -> list:
    """``ops`` in an order where each follows its predecessors among them (ties: graph
    order)."""
    indeg = {op: sum(1 for p in _preds(op) if p in ops) for op in ops}
    users: dict = {}
    for op in ops:
        for p in _preds(op):
            if p in ops:
                users.setdefault(p, []).append(op)
    ready = sorted((op for op, n in indeg.items() if n == 0), key=lambda o: o._id)
    out = []
    while ready:
        op = ready.pop(0)
        out.append(op)
        for u in sorted(users.get(op, ()), key=lambda o: o._id):
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    if len(out) != len(ops):  # a cycle: the planner refuses the graph anyway
        raise InvalidArgumentError("exactly_once: the updates made in the block form a cycle")
    return out


def _guard(g, created: list, token, capacity: int) -> list:
    """Gate every region's guarded ops behind its ledger's claim (see the module docstring);
    returns the ledgers, ``(tokens, state)`` per region."""
    made_vars = {op.name for op in created if op.type == "VariableV2"}
    local = {v.op.name for v in g.get_collection(LOCAL_VARIABLES) if hasattr(v, "op")}
    inits = {v.initializer for c in (GraphKeys.GLOBAL_VARIABLES, LOCAL_VARIABLES)
             for v in g.get_collection(c) if hasattr(v, "initializer")}
    guarded = [op for op in created if _is_update(op, made_vars, local, inits)]
    if not guarded:
        return []
    regions, where = _regions(g, guarded)
    is_guarded = set(guarded)
    done: dict = {}  # region key -> its Merge op: the region has run or was dropped
    machinery: set = set()  # the ops made here (their edges are already right)
    ledgers = []
    for i, key in enumerate(sorted(regions, key=lambda k: (k[1], regions[k][0]._id))):
        ops = regions[key]
        gated = [op for op in ops if op in is_guarded]
        if not gated:
            continue  # only ops between regions: they pass their inputs' liveness on
        members = set(ops)
        deps, ctrl = [], []  # the tensors and ops the region waits for from outside
        for op in ops:
            for t in op.inputs:
                if t.op not in members and t not in deps:
                    deps.append(t)
            for c in op.control_inputs:
                c = done.get(where.get(c), c)
                if c not in members and c not in ctrl:
                    ctrl.append(c)
        anchor = g.get_operation_by_name(gated[0].attrs["var_name"])
        # the anchor's own device too (inside colocate_with, which ignores outer scopes): the
        # Saver shards by it, so the ledger is written by its PS with what it guards
        with g.name_scope(f"ledger_{i}"), g.device(None), g.colocate_with(anchor), \
                g.device(anchor.device or None), g.control_dependencies(None):
            tokens = Variable(zeros([capacity], _dt.string), trainable=False, name="tokens")
            state = Variable(np.zeros(3, np.int64), trainable=False, name="state")
            with g.control_dependencies(ctrl):
                claim = _ledger.ledger_claim(tokens, state, token, deps, name="claim")
            no, yes = switch(claim, claim)
            pivot_yes, pivot_no = identity(yes, name="apply"), identity(no, name="drop")
            with g.control_dependencies(ops):
                ran = identity(pivot_yes, name="applied")
            done[key] = merge([ran, pivot_no], name="done")[0].op
        for op in gated:
            op._add_control_input(pivot_yes.op)
        machinery.update((claim.op, no.op, pivot_yes.op, pivot_no.op, ran.op, done[key]))
        ledgers.append((tokens, state))
    # every control edge leaving a gated region waits on its Merge (live whether it ran)
    for op in g.get_operations():
        cis = op.control_inputs
        if not cis or op in machinery:
            continue
        new = []
        for c in cis:
            k = where.get(c)
            if k in done and where.get(op) != k:
                c = done[k]
            if c not in new and c is not op:
                new.append(c)
        if new != list(cis):
            op.control_inputs = new
    return ledgers
