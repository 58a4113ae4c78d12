"""``tv.train.SyncReplicasOptimizer``: synchronous data-parallel training with backup workers.

Design
------
TF 1.x's protocol, built from ops that hold the pure machines of
:mod:`tensorvm.train.sync_state` as resources on the parameter servers:

* each PS device holding trainable variables gets one *accumulator* (``SyncAccApply`` /
  ``SyncAccTake``): a worker's gradients for that device's variables go there in one op, so
  they are accepted or dropped together; the first ``replicas_to_aggregate`` gradients of the
  current global step win, older ones (``stale``) and later ones (``surplus``) are dropped;
* the global step's device holds the *token gate* (``SyncTokenWait`` / ``SyncTokenRelease``).

A worker's ``train_op``: apply its gradients (tagged with its ``local_step``, a variable
beside the token gate, named after the worker's device), then wait for a token and set
``local_step`` to the released step (one task on the PS after the worker's). The chief
additionally runs ``chief_train_op`` in a loop (the "chief queue runner", a thread the
session hook starts): take the averaged gradients (waits for N), apply them with the wrapped
optimizer, increment the global step, release ``total_num_replicas`` tokens. With
``total_num_replicas > replicas_to_aggregate`` the slowest workers' gradients are the ones
dropped, so a straggler does not hold the step.

Sparse gradients (embedding lookups) stay ``IndexedSlices``: indices and values travel to the
PS, are deduplicated (summed per row) there and applied with a scatter update.

Waiting ops release their Dask worker slot (``tensorvm.vm.queues.Waiter``) and give up when the
step is cancelled (on the direct data plane, where the op table's ``waits="steps"`` lets sync
steps run, the client's ``tvm_cancel`` after a timeout or a lost device marks the step). After a restore (a lost PS) the chief's ``chief_init_op`` sets every
accumulator and the gate to the restored global step, and each worker's
``local_step_init_op`` sets its local step to it; :meth:`make_session_run_hook` runs both.

Step tokens (``step_tokens=True``, set before ``minimize``; ``run_replicas(sync=True)`` on the
:class:`~tensorvm.train.ClusterCoordinator` does): :attr:`step_token` is a placeholder fed with
each run's token, made distinct per step of a K-step run where the gradients arrive
(:func:`~tensorvm.ops.state.ledger.per_step_token`: ``token#k``); an accumulator
accepts a token once, for good, so the twin of a gradient that arrived already is dropped
(``duplicate``) and its run does not wait for a token. :attr:`counts` (``SyncAccCounts``,
summed over the accumulators, fields :data:`COUNTS`) says how many gradients were accepted,
how many steps taken, and how many dropped, by reason.

Failures: a replica counts once per step (its step re-run after its worker was lost, with
its first gradient already accepted, is dropped as a duplicate); the chief's restart lets go
the workers that waited for a token (their gradients went with the reset), and a take of the
chief loop it replaces gives up (AbortedError, not logged as an error). The chief's runner
refuses ``replicas_to_aggregate`` beyond the ClusterSpec's replica tasks (TF 1.x waits for
ever) and warns when a step waits :data:`STALL_WARNING_S` for gradients. While the chief's
session is recreated (restore, then ``chief_init_op``), a take of its old loop that completes
after the restore gives up when the global step it began at was restored away (checked where
the global step lives on the accumulator's device — always with one PS task).

>>> import numpy as np, tensorvm as tv
>>> w = tv.Variable(np.zeros(2, np.float32), name="w")
>>> loss = tv.reduce_sum((w - 1.0) ** 2)
>>> gs = tv.train.get_or_create_global_step()
>>> opt = tv.train.SyncReplicasOptimizer(tv.train.GradientDescentOptimizer(0.25),
...                                      replicas_to_aggregate=1, total_num_replicas=1)
>>> train = opt.minimize(loss, global_step=gs)
>>> with tv.Session() as s:
...     _ = s.run(tv.global_variables_initializer()); _ = s.run(opt.chief_init_op)
...     _ = s.run(opt.local_step_init_op)
...     chief = opt.get_chief_queue_runner().start(s)  # the chief's loop, in a thread
...     for _ in range(2):
...         _ = s.run(train)  # waits until the chief applied the step
...     chief.stop(s)
...     s.run([w, gs])
[array([0.75, 0.75], dtype=float32), np.int64(2)]
"""
from __future__ import annotations

import contextvars
import logging
import re
import threading
import time

import numpy as np

from ..framework import dtypes as _dt
from ..framework.errors import AbortedError, InvalidArgumentError
from ..framework.indexed_slices import IndexedSlices
from ..framework.op_def_library import apply_op
from ..framework.op_registry import register_op
from ..framework.tensor_conversion import convert_to_tensor
from . import sync_state
from .optimizers import Optimizer

_log = logging.getLogger("tensorvm")
_CODES = {sync_state.ACCEPTED: 0, sync_state.STALE: 1, sync_state.SURPLUS: 2,
          sync_state.AHEAD: 3, sync_state.DUPLICATE: 4}
TWIN = 5  # a DUPLICATE of a step token: the twin of a closure whose gradient arrived already


# ---- resources: a machine and a condition to wait on --------------------------------------

class _Held:
    """A pure machine and the condition its waiting ops sleep on."""

    def __init__(self, machine):
        self.machine = machine
        self.cond = threading.Condition()


def _acc(ctx, name, kinds, num_required) -> _Held:
    return ctx.resources.lookup_or_create(
        "", name, lambda: _Held(sync_state.GradientAccumulator(num_required, kinds)))


def _gate(ctx, name) -> _Held:
    return ctx.resources.lookup_or_create("", name, lambda: _Held(sync_state.TokenGate()))


def _wait_for(ctx, held: _Held, attempt, wakes=None):
    """``attempt()`` under the lock until it returns non-None, waiting on the condition; then
    the other waiters are woken, or only when ``wakes(result)`` says the change may let one
    go on (each wake is a thread switch on the PS, every step)."""
    from ..vm.queues import Waiter
    w = Waiter(ctx)
    try:
        with held.cond:
            while True:
                out = attempt()
                if out is not None:
                    if wakes is None or wakes(out):
                        held.cond.notify_all()
                    return out
                w.wait(held.cond)
    finally:
        w.done()


# ---- kernels ------------------------------------------------------------------------------

def _apply_kernel(ctx, local_step, *flat, acc, kinds, num_required, replica=None,
                  tokened=False):
    held = _acc(ctx, acc, kinds, num_required)
    tok = b""
    if tokened:  # the last input: the run's token (SyncReplicasOptimizer.step_tokens)
        from ..ops.state.ledger import per_step_token, token_bytes
        tok = per_step_token(ctx, token_bytes(flat[-1], ctx.op_name))  # token#k
        flat = flat[:-1]
    grads, i = [], 0
    for kind in kinds:
        if kind == "dense":
            grads.append(np.asarray(flat[i]))
            i += 1
        else:
            grads.append((np.asarray(flat[i]), np.asarray(flat[i + 1])))
            i += 2
    # only an accepted gradient that completes the set lets a waiting take go on
    decision = _wait_for(ctx, held,
                         lambda: held.machine.apply(int(local_step), grads, replica, tok),
                         lambda d: d == sync_state.ACCEPTED and held.machine.ready())
    if decision == sync_state.DUPLICATE and tok:
        return np.int32(TWIN)
    return np.int32(_CODES[decision])


def _take_kernel(ctx, step, *, acc, kinds, num_required, specs, global_step=None):
    held = _acc(ctx, acc, kinds, num_required)
    since: list = []  # the generation this take began waiting in
    gs_var = None  # the global step, where it lives on this device
    if global_step is not None:
        try:
            gs_var = ctx.resources.lookup(*global_step)
        except Exception:  # noqa: BLE001 - on another device: not checked here
            gs_var = None

    def attempt():
        m = held.machine
        cur = getattr(gs_var, "value", None)
        if cur is not None and m.ready() and m.step == int(step) and int(cur) != int(step):
            raise AbortedError(  # the gradients were computed before the restore
                f"the global step went from {int(step)} to {int(cur)} while the chief's take "
                "waited (the chief's session was restored): that take's loop was replaced; "
                "its gradients are not applied")
        got = m.take(int(step), since[0] if since else None)
        if got is None and not since:
            since.append(held.machine.generation)
        return got
    out = _wait_for(ctx, held, attempt)
    flat = []
    for kind, g in zip(kinds, out):
        flat.extend([g] if kind == "dense" else list(g))
    return tuple(flat) if len(flat) > 1 else flat[0]


def _acc_set_kernel(ctx, step, *, acc, kinds, num_required):
    held = _acc(ctx, acc, kinds, num_required)
    with held.cond:
        held.machine.set_step(int(step))
        held.cond.notify_all()
    return np.int64(step)


def _token_wait_kernel(ctx, local_step, *decisions, gate):
    if decisions and all(int(d) == TWIN for d in decisions):
        # a closure's twin (its gradient arrived already, from its first run): nothing was
        # added, so the worker goes on at once at its step (no token: it computed nothing
        # new for any step; its next gradient is for the same step)
        return np.int64(local_step)
    held = _gate(ctx, gate)
    since: list = []  # the gate's restarts when this wait began

    def attempt():
        got = held.machine.try_take(int(local_step), since[0] if since else None)
        if got is None and not since:
            since.append(held.machine.restarts)
        return got
    # a token taken lets no other waiter go on (fewer are left): no wake
    return np.int64(_wait_for(ctx, held, attempt, lambda _: False))


def _token_release_kernel(ctx, step, *, gate, tokens, restart=False):
    held = _gate(ctx, gate)
    with held.cond:
        if restart:
            held.machine.restart(int(step), tokens)
        else:
            held.machine.release(int(step), tokens)
        held.cond.notify_all()
    return np.int64(step)


def _close_kernel(ctx, *, acc, gate):
    try:
        held = ctx.resources.lookup("", acc or gate)
    except Exception:  # noqa: BLE001 - nothing made yet: nothing waits
        return np.int64(0)
    with held.cond:
        held.machine.close()
        held.cond.notify_all()
    return np.int64(1)


def _counts_kernel(ctx, *, acc):
    try:
        held = ctx.resources.lookup("", acc)
    except Exception:  # noqa: BLE001 - no gradient arrived yet
        return np.zeros(len(COUNTS), np.int64)
    with held.cond:
        m = held.machine
        return np.array([m.accepted, m.taken] + [m.dropped[k] for k in COUNTS[2:]], np.int64)


COUNTS = ("accepted", "taken", sync_state.STALE, sync_state.SURPLUS, sync_state.AHEAD,
          sync_state.DUPLICATE)  # the fields of SyncAccCounts


def _scalar_i64(inputs, attrs):
    return [(_dt.int64, ())]


def _take_shape(inputs, attrs):
    return [(_dt.as_dtype(d), s) for d, s in attrs["specs"]]


# The op table's ``waits``: apply, take and the token wait wait only for other steps of this
# protocol (bounded: one per replica and the chief's loop; each gives up when its step is
# cancelled), the others never wait; so sync steps run on the direct data plane.
for _op, _shape, _kernel, _waits in (
        ("SyncAccApply", lambda i, a: [(_dt.int32, ())], _apply_kernel, "steps"),
        ("SyncAccTake", _take_shape, _take_kernel, "steps"),
        ("SyncAccSetStep", _scalar_i64, _acc_set_kernel, "never"),
        ("SyncTokenWait", _scalar_i64, _token_wait_kernel, "steps"),
        ("SyncTokenRelease", _scalar_i64, _token_release_kernel, "never"),
        ("SyncClose", _scalar_i64, _close_kernel, "never")):
    register_op(_op, _shape, _kernel, stateful=True, needs_ctx=True, differentiable=False,
                waits=_waits)
register_op("SyncAccCounts", lambda i, a: [(_dt.int64, (len(COUNTS),))], _counts_kernel,
            stateful=True, needs_ctx=True, differentiable=False, waits="never",
            cpu_only="gradient accumulators are host resources (TF's ConditionalAccumulator "
                     "is CPU-only too)")


# ---- the optimizer ------------------------------------------------------------------------

def dedupe_gradients(grads_and_vars):
    """Sum the rows of repeated indices of each sparse gradient where it is computed (on the
    worker), so each touched row crosses to the PS once."""
    from .optimizers import _dedupe
    out = []
    for g, v in grads_and_vars:
        if isinstance(g, IndexedSlices):
            with g.values.graph.colocate_with(g.values.op):
                idx, vals = _dedupe(g)
            g = IndexedSlices(vals, idx, g.dense_shape)
        out.append((g, v))
    return out


class SyncReplicasOptimizer(Optimizer):
    """Wraps an optimizer: gradients of ``replicas_to_aggregate`` replicas are averaged on the
    PS and applied once per global step; ``total_num_replicas - replicas_to_aggregate``
    backup workers make stragglers harmless (their gradients arrive stale and are dropped).

    Build the same graph on every worker (``minimize`` or ``compute_gradients`` +
    ``apply_gradients`` with ``global_step``); each runs ``train_op``; the chief also runs
    :attr:`chief_train_op` in a loop — :meth:`make_session_run_hook` (for
    ``MonitoredTrainingSession``) or ``tv.train.run_replicas`` does that for you.
    """

    def __init__(self, opt: Optimizer, replicas_to_aggregate: int,
                 total_num_replicas: int | None = None, variable_averages=None,
                 variables_to_average=None, use_locking: bool = False,
                 name: str = "sync_replicas"):
        total = replicas_to_aggregate if total_num_replicas is None else total_num_replicas
        if replicas_to_aggregate < 1 or total < replicas_to_aggregate:
            raise InvalidArgumentError(
                f"need 1 <= replicas_to_aggregate ({replicas_to_aggregate}) <= "
                f"total_num_replicas ({total})")
        if variable_averages is not None:
            raise InvalidArgumentError("SyncReplicasOptimizer: variable_averages is not "
                                       "supported")
        super().__init__(getattr(opt, "_lr", None), use_locking, name)
        self._opt = opt
        self._n = int(replicas_to_aggregate)
        self._total = int(total)
        self.chief_train_op = None
        self.chief_init_op = None
        self.local_step_init_op = None
        self.close_op = None
        # How the chief's runner runs chief_train_op (tv.train.run_replicas sets them: the
        # direct data plane, K steps a run).
        self.chief_run_options = None
        self.chief_steps_per_run = 1
        # Set before minimize/apply_gradients (the ClusterCoordinator's run_replicas does):
        # step_tokens=True makes :attr:`step_token` a placeholder whose value tags the
        # gradients of a run (one token per step of it), deduplicated for good by the
        # accumulators; tokens_per_step replaces total_num_replicas as the tokens a release
        # gives.
        self.step_tokens = False
        self.tokens_per_step = None
        self.step_token = None
        self.counts = None  # SyncAccCounts summed over the accumulators (after apply_gradients)
        self._local_step = None
        self._global_step = None

    @property
    def replicas_to_aggregate(self) -> int:
        return self._n

    @property
    def total_num_replicas(self) -> int:
        return self._total

    def compute_gradients(self, loss, var_list=None, **kw):
        """The wrapped optimizer's gradients, sparse ones deduplicated on the worker."""
        return dedupe_gradients(self._opt.compute_gradients(loss, var_list=var_list, **kw))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Build the worker's ``train_op`` (returned), the chief's :attr:`chief_train_op`,
        :attr:`chief_init_op` and :attr:`local_step_init_op`. ``global_step`` is required."""
        if global_step is None:
            raise InvalidArgumentError("SyncReplicasOptimizer.apply_gradients needs global_step")
        gv = [(g, v) for g, v in grads_and_vars if g is not None]
        if not gv:
            raise InvalidArgumentError("apply_gradients: no gradients to apply")
        from ..ops.array.array_ops import group
        from ..ops.state.variables import Variable
        graph = global_step.graph
        self._global_step = global_step
        with graph.as_default():  # this replica's device: where the device scope puts an op
            from ..ops.array.array_ops import no_op
            worker_device = no_op(name="sync_replica_here").device
        base = f"{self._name}/{'/'.join(sorted(v.op.name for _, v in gv))[:80]}"
        with graph.as_default(), graph.name_scope(name or self._name):
            # The worker's local step lives beside the token gate (named after the worker, so
            # replicas' steps are apart): applying, waiting for a token and taking the next
            # step are then one task on the PS, not a hop back to the worker.
            tag = re.sub(r"[^A-Za-z0-9]+", "_", worker_device or "local").strip("_")
            with graph.device(None), graph.device(global_step.device), \
                    graph.colocate_with(None):
                self._local_step = Variable(np.int64(0), trainable=False,
                                            name=f"sync_rep_local_step_{tag}",
                                            collections=["local_variables"])
            with graph.colocate_with(global_step.op):
                gs_value = global_step.read_value()
            gs_attrs = getattr(global_step.op, "attrs", {}) or {}
            gs_key = (gs_attrs.get("container") or "", gs_attrs["var_name"]) \
                if gs_attrs.get("var_name") else None
            by_device: dict[str, list] = {}
            for g, v in gv:
                by_device.setdefault(_accumulator_key(v), []).append((g, v))
            if self.step_tokens:  # fed per run; each of a run's K steps claims its own
                from ..ops.array.array_ops import placeholder_with_default
                with graph.control_dependencies(None):
                    tok = self.step_token = placeholder_with_default(
                        np.asarray(b"", dtype=object), [], name="step_token")
            applied, taken, acc_inits, counts = [], [], [], []
            for key, group_gv in sorted(by_device.items()):
                acc = f"{base}/acc/{key}"
                kinds, flat, specs = [], [], []
                for g, v in group_gv:
                    if isinstance(g, IndexedSlices):
                        kinds.append("sparse")
                        flat += [g.indices, g.values]
                        specs += [(g.indices.dtype.name, (None,)),
                                  (v.dtype.name, (None,) + tuple(v.shape.dims[1:]))]
                    else:
                        g = convert_to_tensor(g)
                        kinds.append("dense")
                        flat.append(g)
                        specs.append((v.dtype.name, tuple(v.shape.dims)))
                attrs = {"acc": acc, "kinds": tuple(kinds), "num_required": self._n}
                with graph.colocate_with(group_gv[0][1].op):
                    applied.append(apply_op(
                        "SyncAccApply", [self._local_step.value()] + flat +
                        ([tok] if self.step_tokens else []),
                        {**attrs, "replica": tag, "tokened": bool(self.step_tokens)},
                        name="accumulate").outputs[0])
                    outs = apply_op("SyncAccTake", [gs_value],
                                    {**attrs, "specs": tuple(specs), "global_step": gs_key},
                                    name="take").outputs
                    acc_inits.append(apply_op("SyncAccSetStep", [gs_value], dict(attrs),
                                              name="acc_set_step").outputs[0])
                    counts.append(apply_op("SyncAccCounts", [], {"acc": acc},
                                           name="acc_counts").outputs[0])
                i = 0
                for kind, (g, v) in zip(kinds, group_gv):
                    if kind == "dense":
                        taken.append((outs[i], v))
                        i += 1
                    else:
                        taken.append((IndexedSlices(outs[i + 1], outs[i], g.dense_shape), v))
                        i += 2
            gate = f"{base}/tokens"
            tokens = int(self.tokens_per_step or self._total)
            with graph.colocate_with(global_step.op):
                # the accumulators' decisions: a closure's twin does not wait (see the kernel)
                token = apply_op("SyncTokenWait", [self._local_step.value()] + applied,
                                 {"gate": gate}, name="token_wait").outputs[0]
            update = self._opt.apply_gradients(taken, global_step=global_step)
            with graph.colocate_with(global_step.op):
                with graph.control_dependencies([update]):
                    # the step the update made: a read made under the dependency sees it
                    self.chief_train_op = apply_op(
                        "SyncTokenRelease", [global_step.read_value()],
                        {"gate": gate, "tokens": tokens}, name="release")
                release_now = apply_op("SyncTokenRelease", [gs_value],
                                       {"gate": gate, "tokens": tokens, "restart": True},
                                       name="release_restored").outputs[0]
                closes = [apply_op("SyncClose", [], {"acc": None, "gate": gate},
                                   name="close_gate").outputs[0]]
            for key, group_gv in sorted(by_device.items()):
                with graph.colocate_with(group_gv[0][1].op):
                    closes.append(apply_op("SyncClose", [], {"acc": f"{base}/acc/{key}",
                                                             "gate": None},
                                           name="close_acc").outputs[0])
            self.chief_init_op = group(release_now, *acc_inits, name="chief_init")
            from ..ops.math.math_ops import add_n
            self.counts = counts[0] if len(counts) == 1 else add_n(counts, name="acc_counts")
            self.close_op = group(*closes, name="close")
            with graph.colocate_with(self._local_step.op):
                train_op = self._local_step.assign(token).op
                self.local_step_init_op = self._local_step.assign(gs_value).op
        return train_op

    def get_init_tokens_op(self, num_tokens: int = -1):
        """TF's name: here the chief's :attr:`chief_init_op` (tokens for the restored step)."""
        return self.chief_init_op

    def get_chief_queue_runner(self):
        """A runner that runs :attr:`chief_train_op` in a thread (``start(sess)``/``stop()``)."""
        return ChiefRunner(self.chief_train_op, self.close_op, self.chief_steps_per_run,
                           self.chief_run_options, replicas_to_aggregate=self._n)

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1):
        from .hooks import SyncReplicasHook
        return SyncReplicasHook(self, is_chief)

    def get_slot(self, *a, **kw):
        return self._opt.get_slot(*a, **kw)

    def get_slot_names(self, *a, **kw):
        return self._opt.get_slot_names(*a, **kw)

    def variables(self):
        return self._opt.variables()


def _accumulator_key(v) -> str:
    """The accumulator ``v``'s gradients go to: one per PS task (a device that names its
    task, as ``replica_device_setter`` gives), so a worker's step hands that task all its
    gradients in one ``SyncAccApply`` and the chief takes them in one ``SyncAccTake`` (one
    per variable made a step wait, wake and hop once per variable); a variable with no task
    yet (placed later) keeps one of its own, by its colocation group."""
    dev = v.op.device or ""
    if "/task:" in dev:
        return re.sub(r"[^A-Za-z0-9_.]+", "_", dev).strip("_")
    return v.op.colocation or v.op.name


REPLICA_JOBS = ("chief", "master", "worker")  # the jobs whose tasks are training replicas


def check_replicas(sess, replicas_to_aggregate: int) -> None:
    """InvalidArgumentError if the session's ClusterSpec has fewer replica tasks (jobs
    ``chief``, ``master``, ``worker``) than ``replicas_to_aggregate``: no step could ever
    gather that many gradients (TF 1.x waits for ever). Sessions without a ClusterSpec (an
    existing cluster's workers, in process) are not checked: the chief's runner warns instead
    when a step waits :data:`STALL_WARNING_S`."""
    spec = getattr(getattr(sess, "_backend", None), "spec", None)
    if spec is None:
        return
    jobs = [j for j in spec.jobs if j in REPLICA_JOBS]
    if not jobs:
        return
    n = sum(spec.num_tasks(j) for j in jobs)
    if replicas_to_aggregate > n:
        raise InvalidArgumentError(
            f"SyncReplicasOptimizer: replicas_to_aggregate={replicas_to_aggregate} but the "
            f"cluster has {n} replica task(s) ({', '.join(f'/job:{j}' for j in jobs)}): no "
            "step could ever gather that many gradients (TF 1.x waits for ever here); "
            f"aggregate at most {n}, or add workers")


STALL_WARNING_S = 60.0  # a chief step that waits this long for gradients is logged


class ChiefRunner:
    """Runs ``op`` in a loop in a thread until stopped or an error (kept in ``error``).

    ``start`` first checks the session's cluster has ``replicas_to_aggregate`` replica tasks
    (:func:`check_replicas`); a run waiting longer than :data:`STALL_WARNING_S` for gradients
    is logged as a warning (once per run)."""

    def __init__(self, op, close_op=None, steps_per_run: int = 1, options=None,
                 replicas_to_aggregate: int | None = None):
        self.op = op
        self.close_op = close_op
        self.steps_per_run = steps_per_run
        self.options = options
        self.replicas_to_aggregate = replicas_to_aggregate
        self.error: BaseException | None = None
        self.runs = 0
        self.stalls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._run_since: float | None = None

    def _watch(self) -> None:
        """Warn once per run that waits more than STALL_WARNING_S (checked every 5 s)."""
        warned = None
        while not self._stop.wait(min(5.0, STALL_WARNING_S)):
            since = self._run_since
            if since is None or since == warned:
                continue
            waited = time.monotonic() - since
            if waited >= STALL_WARNING_S:
                warned = since
                self.stalls += 1
                _log.warning(
                    "sync replicas: the chief has waited %.0f s for the %s gradients of one "
                    "step; is every replica running its train_op? (replicas_to_aggregate "
                    "cannot exceed the replicas that run)", waited,
                    self.replicas_to_aggregate or "required")

    def start(self, sess) -> ChiefRunner:
        if self.replicas_to_aggregate is not None:
            check_replicas(sess, self.replicas_to_aggregate)
        self._stop.clear()
        self.error = None

        def loop():
            try:
                while not self._stop.is_set():
                    self._run_since = time.monotonic()
                    sess.run(self.op, options=self.options, steps=self.steps_per_run)
                    self._run_since = None
                    self.runs += 1
            except Exception as exc:  # noqa: BLE001 - kept for the trainer; a stop cancels
                if isinstance(exc, AbortedError):  # a restarted chief took over: not an error
                    _log.info("sync replicas: the chief's runner was replaced: %s", exc)
                elif not self._stop.is_set():
                    _log.warning("sync replicas: the chief's runner stopped: %s", exc)
                    self.error = exc
            finally:
                self._run_since = None
                self._stop.set()  # the loop is over: so is its watch
        # in a copy of the caller's context: its keys and reports belong to the caller's job
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(loop,),
                                        name="tv-sync-chief", daemon=True)
        self._thread.start()
        threading.Thread(target=self._watch, name="tv-sync-chief-watch", daemon=True).start()
        return self

    def stop(self, sess=None, timeout: float | None = None) -> None:
        """Stop after the current run. With ``sess``, run ``close_op`` first so that a run
        waiting for gradients ends (OutOfRangeError, expected and not kept), and wait for the
        thread (``timeout``: 30 s). Without it (the chief's session is being recreated after a
        loss), wait at most ``timeout`` (0.25 s): a run still waiting for gradients then ends
        when the chief's restart (``chief_init_op``) resets the accumulators — its take gives
        up with AbortedError — or, if the gradients come first, with that step."""
        self._stop.set()
        if sess is not None and self.close_op is not None:
            sess.run(self.close_op)
        if timeout is None:
            timeout = 30.0 if sess is not None else 0.25
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive() and sess is not None:
                _log.warning("sync replicas: the chief's runner did not stop in %.0f s", timeout)
