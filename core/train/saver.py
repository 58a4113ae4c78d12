"""``tv.train.Saver``: checkpoints as graph ops, one shard per device, on fsspec storage.

Design
------
The Saver groups its variables by device (the variable op's requested device; partitioned
variables contribute one piece per device). For each group it builds, on the host CPU of the
group's first variable's task (checkpoints are host I/O: TF's SaveV2/RestoreV2 are CPU-only):

* a ``SaveShard`` op taking the group's variable values and writing data file ``i`` of ``n``
  with :func:`tensorvm.storage.write_shard`; it returns its index entries (JSON), the device and
  the Dask worker that wrote them. A variable on a GPU is read on the GPU and its value copied
  to the host by the plan's device-to-host copy;
* a ``RestoreShard`` op that reads only its own entries with
  :func:`tensorvm.storage.read_tensors` (which verifies every size and CRC-32C), checks each
  piece's shape and dtype against its variable and outputs the pieces; an ``Assign`` per
  variable, colocated with it, stores its piece (so restore also initialises). A variable on a
  GPU gets its piece through the plan's host-to-device copy and holds a device array.

The shard ops are *not* colocated with the variables: a colocation group holding a CPU-only
op is placed on the CPU as a whole, which would move a GPU variable to the CPU in the steps
that save or restore it only (and read an uninitialised variable there).

A ``CommitCheckpoint`` op on the first shard's host takes every shard's entries (so it runs after all
of them) and calls :func:`tensorvm.storage.commit`, which checks that every shard's data file
is there (a ``file://`` folder the workers do not share is named, with the worker that wrote
the missing shard), replaces ``index.json`` atomically and then the ``checkpoint`` state file.
Every save writes its shards into fresh attempt folders, so a crash anywhere before the index
is replaced — even while re-saving the same path (no ``global_step``, or a repeated one) —
leaves the committed checkpoint restorable and ``latest_checkpoint`` where it was. On a
distributed session ``memory://`` (one process's memory) is refused.

``save`` is one ``session.run`` of the commit op: the shards of the parameter
servers are separate tasks on separate workers, written in parallel. The checkpoint and folder
URLs are fed through placeholders, so one compiled plan serves every step.

A torn or tampered checkpoint is ``tv.errors.DataLossError`` naming the file; a missing one or a
missing tensor is ``NotFoundError``. Partitioned variables: pass ``var_list={"emb": [part0,
part1, …]}`` with the parts split along their first dimension; each part is saved with its slice
(``"0:50,:"``) and restore takes the matching piece (or cuts it out of the reassembled whole, so
the partitioning may change between save and restore).

>>> import tensorvm as tv
>>> w = tv.Variable([1.0, 2.0], name="w")
>>> saver = tv.train.Saver([w])
>>> with tv.Session() as s:
...     _ = s.run(w.initializer)
...     path = saver.save(s, "memory://tvm-doc-saver/model.ckpt", global_step=3)
...     _ = s.run(w.assign([0.0, 0.0])); saver.restore(s, path); s.run(w).tolist()
[1.0, 2.0]
>>> path, tv.train.latest_checkpoint("memory://tvm-doc-saver") == path
('memory://tvm-doc-saver/model.ckpt-3', True)
"""
from __future__ import annotations

import json
import logging

import numpy as np

from ..framework import dtypes as _dt
from ..framework import errors
from .. import storage
from ..framework.device_spec import DeviceSpec
from ..ops.array.array_ops import group as group_ops
from ..ops.array.array_ops import placeholder
from ..framework.op_def_library import apply_op
from ..framework.op_registry import register_op
from ..ops.state.variables import Variable, global_variables

__all__ = ["Saver", "latest_checkpoint", "list_checkpoints", "checkpoint_exists"]
_log = logging.getLogger("tensorvm")


# ---- errors from storage ---------------------------------------------------------------------

def _translate(e: BaseException, what: str) -> errors.OpError:
    """A ``tensorvm.storage`` error as the matching ``tv.errors`` class (message names the URL)."""
    if isinstance(e, errors.DataLossError):
        return errors.DataLossError(f"{what}: {e}", url=getattr(e, "url", None))
    if isinstance(e, (storage.CheckpointNotFoundError, FileNotFoundError)):
        return errors.NotFoundError(f"{what}: {e}")
    if isinstance(e, KeyError):
        return errors.NotFoundError(f"{what}: {e.args[0] if e.args else e}")
    if isinstance(e, (ValueError, TypeError)):
        return errors.InvalidArgumentError(f"{what}: {e}")
    return errors.UnknownError(f"{what}: {type(e).__name__}: {e}")


def _storage_call(what, fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except errors.OpError as e:
        if isinstance(e, errors.DataLossError) and e.url is not None and e.op is None:
            raise _translate(e, what) from e  # storage's, naming its URL: say what we did
        raise
    except Exception as e:  # noqa: BLE001 - re-raised as a tv.errors class
        raise _translate(e, what) from e


def _check_reachable(sess, url: str, what: str) -> None:
    """A distributed session's shards are written and read by tasks in worker processes: a
    per-process filesystem (``memory://``) there is invisible to every other process."""
    if getattr(sess, "client", None) is not None and storage.is_process_local(url):
        raise errors.InvalidArgumentError(
            f"{what}: {url} is a memory:// URL, which lives inside one process; on a "
            "distributed session the shards are written and read by tasks on worker "
            "processes, so no other process (nor the committing task) would see them. Use a "
            "filesystem every worker shares: file:// on shared storage, s3://, gs://, ...")


def _worker_address() -> str:
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return "in-process"


# ---- kernels ---------------------------------------------------------------------------------

def _save_shard_kernel(ctx, ckpt_url, *values, names, slices, shard, num_shards):
    url = str(np.asarray(ckpt_url).item())
    tensors = {}
    for name, spec, v in zip(names, slices, values):
        arr = np.asarray(v)
        tensors[name if spec is None else (name, spec)] = arr
    entries = _storage_call(f"saving shard {shard} of {num_shards} to {url}",
                            storage.write_shard, url, shard, num_shards, tensors)
    return np.asarray(json.dumps({"entries": entries, "device": ctx.device,
                                  "worker": _worker_address(), "shard": shard,
                                  "num_shards": num_shards}), dtype=object)


def _commit_kernel(ctx, dir_url, ckpt_url, step, *shards, max_to_keep, keep_hours):
    dir_url = str(np.asarray(dir_url).item())
    url = str(np.asarray(ckpt_url).item())
    step = int(np.asarray(step))
    docs = [json.loads(str(np.asarray(s).item())) for s in shards]
    entries = [e for d in docs for e in d["entries"]]
    meta = {"writers": [{k: d.get(k) for k in ("shard", "num_shards", "device", "worker")}
                        for d in docs]}
    # Looked up at call time, so tests may inject a crash between the shards and the commit.
    _storage_call(f"committing checkpoint {url}", storage.commit, dir_url, url, entries,
                  None if step < 0 else step, max_to_keep=max_to_keep or None,
                  keep_checkpoint_every_n_hours=keep_hours, meta=meta)
    return np.asarray(url, dtype=object)


def _restore_shard_kernel(ctx, ckpt_url, *, names, slices, variables):
    url = str(np.asarray(ckpt_url).item())
    values = _read_pieces(url, names, slices)
    out = []
    for (name, spec), attrs in zip(zip(names, slices), variables):
        value = values[(name, spec)]
        dtype, shape = attrs["dtype"], attrs["shape"]
        if shape is not None and None not in shape and tuple(value.shape) != tuple(shape):
            raise errors.InvalidArgumentError(
                f"restoring {attrs['var_name']!r} from {url}: the checkpoint holds shape "
                f"{list(value.shape)} for {name!r}{'[' + spec + ']' if spec else ''}, the "
                f"variable has shape {list(shape)}")
        if dtype.is_string:
            value = np.asarray(value.astype(object) if value.dtype.kind in "US" else value,
                               dtype=object)
        elif value.dtype != dtype.np_dtype:
            raise errors.InvalidArgumentError(
                f"restoring {attrs['var_name']!r} from {url}: the checkpoint holds "
                f"{value.dtype} for {name!r}, the variable has dtype {dtype.name}")
        out.append(value)
    return out[0] if len(out) == 1 else tuple(out)  # a one-output kernel returns its value


def _read_tf_pieces(url, names, slices) -> dict:
    """The wanted pieces out of a TensorFlow 1.x checkpoint (``<prefix>.index`` + data)."""
    from ..storage import tensor_bundle
    full = _storage_call(f"restoring from TF checkpoint {url}", tensor_bundle.read_bundle, url,
                         sorted(set(names)))
    return {(n, s): full[n] if s is None else full[n][_box(s)] for n, s in zip(names, slices)}


def _read_pieces(url, names, slices) -> dict:
    """``{(name, spec): array}`` for the wanted pieces, reading only their records."""
    what = f"restoring from checkpoint {url}"
    from ..storage import tensor_bundle
    try:  # tensorvm's own checkpoint first: a TF one at the same prefix is older (or foreign)
        index = _storage_call(what, storage.read_index, url)
    except errors.NotFoundError:
        if tensor_bundle.is_tf_checkpoint(url):
            return _read_tf_pieces(url, names, slices)
        raise
    wanted = set(zip(names, slices))
    exact = [e for e in index["entries"]
             if (e["name"], _canon(e.get("slice"))) in {(n, _canon(s)) for n, s in wanted}]
    have = {(e["name"], _canon(e.get("slice"))) for e in exact}
    out = {}
    if exact:
        got = _storage_call(what, storage.read_slices, url, index={**index, "entries": exact})
        for name, pieces in got.items():
            for spec, arr in pieces:
                for n, s in wanted:
                    if n == name and _canon(s) == _canon(spec):
                        out[(n, s)] = arr
    rest = [(n, s) for n, s in wanted if (n, _canon(s)) not in have]
    if rest:  # other partitioning than at save time, or a missing tensor: reassemble
        known = {e["name"] for e in index["entries"]}
        missing = sorted({n for n, _ in rest if n not in known})
        if missing:
            raise errors.NotFoundError(f"{what}: key(s) {missing} not found in checkpoint "
                                       f"(it holds {sorted(known)})")
        full = _storage_call(what, storage.read_tensors, url, sorted({n for n, _ in rest}),
                             index=index)
        for n, s in rest:
            out[(n, s)] = full[n] if s is None else full[n][_box(s)]
    return out


def _canon(spec):
    if spec is None:
        return None
    from ..storage.slices import format_slice, parse_slice
    return format_slice(parse_slice(spec)[1])


def _box(spec: str):
    from ..storage.slices import parse_slice
    return tuple(slice(None) if r is None else slice(*r) for r in parse_slice(spec)[1])


def _shard_shape(inputs, attrs):
    if inputs[0].dtype != _dt.string:
        raise errors.InvalidArgumentError("SaveShard: the checkpoint URL must be a string")
    return [(_dt.string, ())]


register_op("SaveShard", _shard_shape, _save_shard_kernel, stateful=True, needs_ctx=True,
            differentiable=False)
register_op("CommitCheckpoint", lambda i, a: [(_dt.string, ())], _commit_kernel,
            stateful=True, needs_ctx=True, differentiable=False)
register_op("RestoreShard", lambda i, a: [(v["dtype"], v["shape"]) for v in a["variables"]],
            _restore_shard_kernel, stateful=True, needs_ctx=True, differentiable=False)


# ---- the Saver -------------------------------------------------------------------------------

def _items(var_list) -> list[tuple[str, str | None, Variable]]:
    """``[(saved name, slice spec or None, variable)]`` from a list or a dict."""
    if var_list is None:
        var_list = global_variables()
    if isinstance(var_list, dict):
        pairs = list(var_list.items())
    else:
        pairs = []
        for v in var_list:
            if not isinstance(v, Variable):
                raise errors.InvalidArgumentError(f"Saver: {v!r} is not a tv.Variable")
            pairs.append((v.op.name, v))
    out, seen = [], set()
    for name, v in pairs:
        if name in seen:
            raise errors.InvalidArgumentError(f"Saver: two variables are saved as {name!r}")
        seen.add(name)
        if isinstance(v, (list, tuple)):
            out.extend((name, spec, part) for spec, part in _partition_specs(name, v))
        elif isinstance(v, Variable):
            out.append((name, None, v))
        else:
            raise errors.InvalidArgumentError(f"Saver: {name!r} maps to {v!r}, expected a "
                                              "tv.Variable or a list of partitions")
    return out


def _partition_specs(name, parts):
    """Slice specs of partitions split along the first dimension, in order."""
    offset, out = 0, []
    shapes = [p.shape.dims for p in parts]
    if any(s is None or not s or None in s for s in shapes) or \
            len({s[1:] for s in shapes}) != 1:
        raise errors.InvalidArgumentError(
            f"Saver: partitions of {name!r} need fully defined shapes that differ only in the "
            f"first dimension, got {[list(s) if s else s for s in shapes]}")
    for p, s in zip(parts, shapes):
        spec = ",".join([f"{offset}:{offset + s[0]}"] + [":"] * (len(s) - 1))
        out.append((spec, p))
        offset += s[0]
    return out


def _device_key(v: Variable) -> str:
    return DeviceSpec.parse(v.op.device).to_string() if v.op.device else ""


def _host_of(v: Variable) -> str:
    """The CPU of the task ``v`` asks for (its job/replica/task; the session's default task
    fills what it leaves out): where its shard's host I/O runs."""
    spec = DeviceSpec.parse(v.op.device)
    return DeviceSpec(spec.job, spec.replica, spec.task, "CPU", 0).to_string()


class Saver:
    """Saves and restores variables (``var_list``: all global variables, a list, or a dict of
    saved name → variable or list of partitions).

    ``sharded=True`` writes one data file per device, in parallel; ``False`` writes one file from
    the first variable's device. ``max_to_keep`` (``None``/0: all) and
    ``keep_checkpoint_every_n_hours`` prune old checkpoints after each commit.
    """

    def __init__(self, var_list=None, max_to_keep: int | None = 5,
                 keep_checkpoint_every_n_hours: float | None = 10000.0, sharded: bool = True,
                 name: str = "save", reshape: bool = False, allow_empty: bool = False,
                 **_ignored):
        items = _items(var_list)
        self.max_to_keep = max_to_keep
        self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._empty = not items
        if not items:
            if not allow_empty:
                raise errors.InvalidArgumentError("Saver: no variables to save")
            return
        g = items[0][2].graph
        groups: dict[str, list] = {}
        for it in items:
            key = _device_key(it[2]) if sharded else ""
            groups.setdefault(key, []).append(it)
        self._groups = list(groups.values())
        # No device scope: each shard's ops run on the host CPU of its variables' task.
        with g.as_default(), g.device(None), g.name_scope(name):
            self._ckpt = placeholder(_dt.string, [], name="checkpoint_url")
            self._dir = placeholder(_dt.string, [], name="dir_url")
            self._step = placeholder(_dt.int64, [], name="step")
            shards, restores = [], []
            n = len(self._groups)
            for i, group in enumerate(self._groups):
                host = _host_of(group[0][2])
                values = [v.value() for _, _, v in group]
                with g.device(host):
                    shards.append(apply_op(
                        "SaveShard", [self._ckpt] + values,
                        {"names": tuple(n_ for n_, _, _ in group),
                         "slices": tuple(s for _, s, _ in group), "shard": i,
                         "num_shards": n}, name=f"shard_{i}").outputs[0])
                    pieces = apply_op(
                        "RestoreShard", [self._ckpt],
                        {"names": tuple(n_ for n_, _, _ in group),
                         "slices": tuple(s for _, s, _ in group),
                         "variables": tuple(dict(v._attrs) for _, _, v in group)},
                        name=f"read_shard_{i}").outputs
                # Each piece is stored by an Assign colocated with its variable (on its device).
                assigns = [v.assign(p, name=f"assign_{i}_{k}").op
                           for k, ((_, _, v), p) in enumerate(zip(group, pieces))]
                with g.device(host):
                    restores.append(group_ops(*assigns, name=f"restore_shard_{i}"))
            with g.device(_host_of(self._groups[0][0][2])):
                self._commit = apply_op(
                    "CommitCheckpoint", [self._dir, self._ckpt, self._step] + shards,
                    {"max_to_keep": max_to_keep, "keep_hours": keep_checkpoint_every_n_hours},
                    name="commit").outputs[0]
            self._restores = restores
        self.last_checkpoints: list[str] = []

    @property
    def saver_def(self):
        """The names of the Saver's ops, as plain data (TF's SaverDef): what
        ``tv.train.import_meta_graph`` rebuilds the Saver from."""
        if self._empty:
            return None
        return {"save_tensor": self._commit.name,
                "restore_ops": [op.name for op in self._restores],
                "checkpoint_url": self._ckpt.name, "dir_url": self._dir.name,
                "step": self._step.name, "max_to_keep": self.max_to_keep,
                "keep_checkpoint_every_n_hours": self.keep_checkpoint_every_n_hours,
                "shards": [len(g) for g in self._groups]}

    @classmethod
    def _from_saver_def(cls, graph, saver_def: dict) -> "Saver":
        """The Saver whose ops ``saver_def`` names in ``graph`` (no op is added)."""
        self = cls.__new__(cls)
        if not isinstance(saver_def, dict):
            raise errors.InvalidArgumentError("meta graph: its saver_def must be a dict")
        try:
            self._commit = graph.get_tensor_by_name(saver_def["save_tensor"])
            self._restores = [graph.get_operation_by_name(n)
                              for n in saver_def["restore_ops"]]
            self._ckpt = graph.get_tensor_by_name(saver_def["checkpoint_url"])
            self._dir = graph.get_tensor_by_name(saver_def["dir_url"])
            self._step = graph.get_tensor_by_name(saver_def["step"])
            self._groups = [[None] * int(k) for k in saver_def.get("shards", [])]
        except (errors.NotFoundError, KeyError, TypeError, ValueError, AttributeError) as e:
            raise errors.InvalidArgumentError(
                f"meta graph: its saver_def names a missing or bad node: {e}") from None
        self._empty = False
        self.max_to_keep = saver_def.get("max_to_keep")
        self.keep_checkpoint_every_n_hours = saver_def.get("keep_checkpoint_every_n_hours")
        self.last_checkpoints = []
        return self

    def _write_meta_graph(self, url: str) -> None:
        """Write the meta graph to ``url``, serialised once per graph version (a training
        loop that saves every N steps pays for the JSON once)."""
        from .meta_graph import meta_graph_bytes, write_meta_graph_bytes
        g = self._commit.graph
        key = (g.version, tuple((k, len(v)) for k, v in g._collections.items()))
        cached = getattr(self, "_meta_cache", None)
        if cached is None or cached[0] != key:
            cached = self._meta_cache = (key, meta_graph_bytes(self.export_meta_graph()))
        write_meta_graph_bytes(url, cached[1])

    def export_meta_graph(self, filename=None, collection_list=None, as_text=False,
                          export_scope=None, clear_devices=False, **kwargs) -> dict:
        """``tv.train.export_meta_graph`` of this Saver's graph with its ``saver_def``."""
        from .meta_graph import export_meta_graph
        g = self._commit.graph if not self._empty else None
        return export_meta_graph(filename, saver_def=self.saver_def,
                                 collection_list=collection_list, graph=g,
                                 export_scope=export_scope, clear_devices=clear_devices,
                                 **kwargs)

    def save(self, sess, save_path: str, global_step=None, latest_filename=None,
             meta_graph_suffix=None, write_meta_graph=None, write_state=True) -> str | None:
        """Write a checkpoint ``<dir>/<prefix>-<global_step>`` (``save_path`` =
        ``"URL/dir/prefix"``) in one step and return its path (``None`` with no variables).

        As TF's, it also writes the meta graph next to it (``<path>.meta``, see
        ``tv.train.export_meta_graph``); a graph holding Python code (``py_func``,
        ``Dataset.from_generator``) cannot be exported: then ``write_meta_graph=True`` raises
        ``InvalidArgumentError`` and the default skips the file, logging why."""
        if self._empty:
            return None
        if global_step is not None and not isinstance(global_step, (int, np.integer)):
            global_step = int(sess.run(global_step))
        dir_url, _, prefix = str(save_path).rstrip("/").rpartition("/")
        if not dir_url or not prefix:
            raise errors.InvalidArgumentError(
                f"Saver.save: save_path {save_path!r} must look like 'URL/dir/prefix'")
        try:
            ckpt = storage.checkpoint_url(dir_url, prefix, global_step)
        except ValueError as e:
            raise errors.InvalidArgumentError(f"Saver.save: {e}") from None
        _check_reachable(sess, ckpt, "Saver.save")
        step = -1 if global_step is None else int(global_step)
        path = sess.run(self._commit, {self._ckpt: ckpt, self._dir: dir_url,
                                       self._step: step})
        path = str(np.asarray(path).item())
        if write_meta_graph or write_meta_graph is None:  # <path>.meta (TF's layout)
            try:
                self._write_meta_graph(f"{path}.{meta_graph_suffix or 'meta'}")
            except errors.InvalidArgumentError as e:
                if write_meta_graph:
                    raise
                _log.warning("Saver.save: no meta graph written next to %s: %s", path, e)
        before = self.last_checkpoints
        self.last_checkpoints = [p for p in self.last_checkpoints if p != path] + [path]
        if self.max_to_keep:
            self.last_checkpoints = self.last_checkpoints[-self.max_to_keep:]
        self._remove_pruned_meta_graphs(set(before) - set(self.last_checkpoints),
                                        meta_graph_suffix)
        return path

    @staticmethod
    def _remove_pruned_meta_graphs(dropped, suffix) -> None:
        """Delete the ``.meta`` files of checkpoints that ``max_to_keep`` pruned (TF's rule;
        a checkpoint kept by ``keep_checkpoint_every_n_hours`` keeps its meta graph)."""
        from ..storage.fsio import to_fs
        for old in dropped:
            try:
                fs, folder = to_fs(old)
                if not fs.exists(folder):
                    meta = f"{folder}.{suffix or 'meta'}"
                    if fs.exists(meta):
                        fs.rm(meta)
            except (OSError, ValueError) as e:  # best effort, as the pruning itself
                _log.info("Saver.save: could not remove the meta graph of %s: %s", old, e)

    def restore(self, sess, save_path: str) -> None:
        """Assign every variable its value from the checkpoint at ``save_path`` (a path that
        ``save`` or ``latest_checkpoint`` returned), verifying every checksum."""
        if self._empty:
            return
        if save_path is None:
            raise errors.InvalidArgumentError("Can't load save_path when it is None.")
        _check_reachable(sess, str(save_path), "Saver.restore")
        sess.run(self._restores, {self._ckpt: str(save_path)})

    def recover_last_checkpoints(self, checkpoint_paths) -> None:
        """Set ``last_checkpoints`` (what ``max_to_keep`` prunes from) to ``checkpoint_paths``,
        e.g. after a restart."""
        self.last_checkpoints = list(checkpoint_paths)

    def __repr__(self):
        n = 0 if self._empty else sum(len(g) for g in self._groups)
        shards = 0 if self._empty else len(self._groups)
        return f"<tv.train.Saver {n} tensors in {shards} shards>"


def import_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None,
                      **_ignored):
    """Add the graph of a meta graph (a file URL or ``export_meta_graph``'s dict) to the
    default graph, restore its collections and return its :class:`Saver` (``None`` where it
    has no variables). Bad input raises ``InvalidArgumentError`` (``DataLossError`` for a
    corrupt file, ``NotFoundError`` for a missing one); nothing from the file is executed or
    unpickled."""
    from .meta_graph import load_meta_graph
    g, saver_def = load_meta_graph(meta_graph_or_file, clear_devices, import_scope)
    if saver_def:
        return Saver._from_saver_def(g, saver_def)
    return Saver() if global_variables(g) else None


def latest_checkpoint(checkpoint_dir: str, latest_filename=None) -> str | None:
    """The path of the newest committed checkpoint in ``checkpoint_dir``, or ``None``."""
    return storage.latest_checkpoint(checkpoint_dir)


def list_checkpoints(checkpoint_dir: str) -> list[dict]:
    """Committed checkpoints in ``checkpoint_dir``, oldest first (path, step, time, size)."""
    return storage.list_checkpoints(checkpoint_dir)


def checkpoint_exists(checkpoint_path: str) -> bool:
    """Whether a committed tensorvm checkpoint is at ``checkpoint_path`` (a URL or path, as
    ``Saver.save`` returned it), or a TensorFlow 1.x one (``<prefix>.index``); a missing or
    damaged index counts as none."""
    try:
        storage.read_index(checkpoint_path)
        return True
    except (storage.CheckpointNotFoundError, storage.DataLossError, FileNotFoundError):
        from ..storage import tensor_bundle
        return tensor_bundle.is_tf_checkpoint(checkpoint_path)
