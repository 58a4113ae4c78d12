"""TF 1.x's checkpoint utilities in ``tv.train``, on tensorvm's checkpoints (and TF 1.x's
``<prefix>.index`` bundles, read only), on any fsspec URL.

* the ``checkpoint`` state file: :func:`get_checkpoint_state` (a :class:`CheckpointState`
  with full paths), :func:`update_checkpoint_state`, :func:`generate_checkpoint_state_proto`;
  tensorvm's state file is JSON naming checkpoints relative to their folder (see
  ``tensorvm.storage.checkpoint_state``), TF's text file is read too;
* reading: :func:`list_variables`, :func:`load_variable`, :func:`load_checkpoint` /
  :func:`NewCheckpointReader` (a :class:`CheckpointReader`), :func:`get_checkpoint_mtimes`,
  :func:`remove_checkpoint`;
* :func:`init_from_checkpoint`: variables' initializers become restores of checkpoint
  tensors (TF's assignment-map rules); :func:`warm_start` chooses them by name;
* :func:`checkpoints_iterator` (new checkpoints as they are committed, with TF's timeout and
  ``timeout_fn``), :func:`summary_iterator` (the ``Event`` records of an event file) and
  :func:`write_graph`.

>>> import numpy as np, tensorvm as tv
>>> with tv.Graph().as_default():
...     v = tv.Variable(np.arange(3.0), name="v")
...     with tv.Session() as s:
...         _ = s.run(v.initializer)
...         _ = tv.train.Saver([v]).save(s, "memory://tvm-doc-ckpt-utils/m", global_step=7)
>>> state = tv.train.get_checkpoint_state("memory://tvm-doc-ckpt-utils")
>>> state.model_checkpoint_path
'memory://tvm-doc-ckpt-utils/m-7'
>>> tv.train.list_variables(state.model_checkpoint_path)
[('v', [3])]
>>> tv.train.NewCheckpointReader(state.model_checkpoint_path).get_tensor("v")
array([0., 1., 2.])
>>> tv.train.load_variable("memory://tvm-doc-ckpt-utils", "v")  # a folder: its latest
array([0., 1., 2.])
"""
from __future__ import annotations

import json
import logging
import time

import numpy as np

from ..framework import dtypes as _dt
from ..framework import errors

__all__ = ["CheckpointReader", "CheckpointState", "NewCheckpointReader", "checkpoints_iterator",
           "generate_checkpoint_state_proto", "get_checkpoint_mtimes", "get_checkpoint_state",
           "global_step_of", "init_from_checkpoint", "latest_checkpoint_path", "list_variables",
           "load_checkpoint", "load_variable", "remove_checkpoint", "summary_iterator",
           "update_checkpoint_state", "wait_for_new_checkpoint", "warm_start",
           "warm_start_variables", "write_graph"]
_log = logging.getLogger("tensorvm")


def latest_checkpoint_path(ckpt_dir_or_file: str) -> str:
    """The latest checkpoint of a folder, or the path itself when it is a checkpoint."""
    from .. import storage
    from ..storage import tensor_bundle
    latest = storage.latest_checkpoint(ckpt_dir_or_file)
    if latest is not None:
        return latest
    try:
        storage.read_index(ckpt_dir_or_file)
        return ckpt_dir_or_file
    except (storage.CheckpointNotFoundError, FileNotFoundError, errors.NotFoundError):
        pass
    if tensor_bundle.is_tf_checkpoint(ckpt_dir_or_file):
        return ckpt_dir_or_file
    raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory "
                     f"{ckpt_dir_or_file}")


def _is_tf(path: str) -> bool:
    from .. import storage
    from ..storage import tensor_bundle
    try:
        storage.read_index(path)
        return False
    except (storage.CheckpointNotFoundError, FileNotFoundError):
        return tensor_bundle.is_tf_checkpoint(path)


def list_variables(ckpt_dir_or_file: str) -> list[tuple[str, list[int]]]:
    """``[(name, shape)]`` of every variable in the checkpoint, sorted by name."""
    from .. import storage
    from ..storage import tensor_bundle
    path = latest_checkpoint_path(ckpt_dir_or_file)
    if _is_tf(path):
        return [(k, list(shape)) for k, (_, shape) in tensor_bundle.list_bundle(path).items()]
    index = storage.read_index(path)
    shapes = {e["name"]: list(e.get("full_shape") or e["shape"]) for e in index["entries"]}
    return sorted(shapes.items())


def load_variable(ckpt_dir_or_file: str, name: str) -> np.ndarray:
    """The value of variable ``name`` (``"w"`` or ``"w:0"``) in the checkpoint
    (``NotFoundError`` when it holds no such variable)."""
    from .. import storage
    from ..storage import tensor_bundle
    name = name.removesuffix(":0")
    path = latest_checkpoint_path(ckpt_dir_or_file)
    names = [n for n, _ in list_variables(path)]
    if name not in names:
        raise errors.NotFoundError(f"Key {name} not found in checkpoint {path}")
    if _is_tf(path):
        return tensor_bundle.read_bundle(path, [name])[name]
    return storage.read_tensors(path, [name])[name]


def global_step_of(ckpt_dir: str) -> int:
    """The global step of the latest checkpoint in ``ckpt_dir`` (0 when there is none)."""
    try:
        return int(load_variable(ckpt_dir, "global_step"))
    except (ValueError, errors.NotFoundError, FileNotFoundError):
        return 0


# ---- the state file ---------------------------------------------------------------------------

class CheckpointState:
    """TF's ``CheckpointState`` proto as plain data: ``model_checkpoint_path``,
    ``all_model_checkpoint_paths`` (oldest first), ``all_model_checkpoint_timestamps`` and
    ``last_preserved_timestamp``. ``str()`` gives TF's text format."""

    def __init__(self, model_checkpoint_path="", all_model_checkpoint_paths=(),
                 all_model_checkpoint_timestamps=(), last_preserved_timestamp=0.0):
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = list(all_model_checkpoint_paths)
        self.all_model_checkpoint_timestamps = [float(t) for t in
                                                all_model_checkpoint_timestamps]
        self.last_preserved_timestamp = float(last_preserved_timestamp or 0.0)

    def __str__(self):
        lines = [f'model_checkpoint_path: "{self.model_checkpoint_path}"']
        lines += [f'all_model_checkpoint_paths: "{p}"' for p in self.all_model_checkpoint_paths]
        lines += [f"all_model_checkpoint_timestamps: {t!r}"
                  for t in self.all_model_checkpoint_timestamps]
        if self.last_preserved_timestamp:
            lines.append(f"last_preserved_timestamp: {self.last_preserved_timestamp!r}")
        return "\n".join(lines) + "\n"

    def __repr__(self):
        return f"<tv.train.CheckpointState {self.model_checkpoint_path!r} " \
               f"({len(self.all_model_checkpoint_paths)} checkpoints)>"

    def __eq__(self, other):
        return isinstance(other, CheckpointState) and vars(self) == vars(other)


def _join(dir_url: str, name: str) -> str:
    if "://" in name or name.startswith("/") or not dir_url:
        return name
    return f"{dir_url.rstrip('/')}/{name}"


def _parse_tf_text(text: str) -> dict:
    """The fields of TF's text ``CheckpointState``."""
    import re
    out: dict = {"all_model_checkpoint_paths": [], "all_model_checkpoint_timestamps": []}
    for line in text.splitlines():
        m = re.match(r'^\s*(\w+)\s*:\s*(?:"((?:[^"\\]|\\.)*)"|([-+0-9.eE]+))\s*$', line)
        if not m:
            continue
        key, s, num = m.groups()
        value = s if s is not None else float(num)
        if key in ("all_model_checkpoint_paths", "all_model_checkpoint_timestamps"):
            out[key].append(value)
        else:
            out[key] = value
    return out


def _read_state_file(dir_url: str, filename: str):
    """The state file's fields, or None. Read bounded (a FIFO, a device or a file over
    ``MAX_STATE_BYTES`` is ignored with a warning). tensorvm's JSON state lists only the
    checkpoints still committed (one pruned by another saver is dropped); TF's text state is
    taken as written."""
    from ..storage.checkpoint_state import committed_names
    from ..storage.state_file import read_state_bytes
    raw = read_state_bytes(dir_url, filename)
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        _log.warning("%s/%s: the checkpoint state file is not text; ignored", dir_url, filename)
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return _parse_tf_text(text)
    if not isinstance(doc, dict):
        return None
    paths = doc.get("all_model_checkpoint_paths")
    if isinstance(paths, list) and paths:
        live = committed_names(dir_url)
        stamps = doc.get("all_model_checkpoint_timestamps")
        keep = [i for i, p in enumerate(paths) if p in live]
        doc["all_model_checkpoint_paths"] = [paths[i] for i in keep]
        if isinstance(stamps, list) and len(stamps) == len(paths):
            doc["all_model_checkpoint_timestamps"] = [stamps[i] for i in keep]
    return doc


def get_checkpoint_state(checkpoint_dir: str, latest_filename=None):
    """The :class:`CheckpointState` of ``checkpoint_dir`` (its ``checkpoint`` file, or
    ``latest_filename``), with paths joined to the folder; ``None`` when there is none.

    ``model_checkpoint_path`` is the newest *committed* checkpoint the file names (a save that
    crashed before its commit is skipped, see ``tv.train.latest_checkpoint``); with no state
    file, the newest committed checkpoint found in the folder."""
    from .. import storage
    doc = _read_state_file(checkpoint_dir, latest_filename or "checkpoint")
    latest = storage.latest_checkpoint(checkpoint_dir) if not latest_filename else None
    if doc is None or not doc.get("model_checkpoint_path"):
        if latest is None:
            return None
        doc = {"model_checkpoint_path": latest.rstrip("/").rsplit("/", 1)[-1],
               "all_model_checkpoint_paths": []}
    paths = [_join(checkpoint_dir, str(p)) for p in doc.get("all_model_checkpoint_paths") or []]
    model = latest or _join(checkpoint_dir, str(doc["model_checkpoint_path"]))
    if model not in paths:
        paths.append(model)
    stamps = doc.get("all_model_checkpoint_timestamps") or []
    if len(stamps) != len(paths):
        stamps = []
    return CheckpointState(model, paths, stamps, doc.get("last_preserved_timestamp") or 0.0)


def generate_checkpoint_state_proto(save_dir, model_checkpoint_path,
                                    all_model_checkpoint_paths=None,
                                    all_model_checkpoint_timestamps=None,
                                    last_preserved_timestamp=None) -> CheckpointState:
    """A :class:`CheckpointState` whose paths are relative to ``save_dir`` where they lie in
    it; ``model_checkpoint_path`` is appended to the list when it is not its last entry.
    Timestamps, if given, must match the paths (``ValueError``, TF's message)."""
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        _log.info("%s is not in all_model_checkpoint_paths. Manually adding it.",
                  model_checkpoint_path)
        paths.append(model_checkpoint_path)
    if all_model_checkpoint_timestamps and \
            len(all_model_checkpoint_timestamps) != len(paths):
        raise ValueError(f"Checkpoint timestamps, if provided, must match checkpoint paths "
                         f"(got paths {paths} and timestamps "
                         f"{list(all_model_checkpoint_timestamps)})")
    if not str(save_dir).startswith("/"):  # TF: relative to a relative save_dir (or a URL)
        model_checkpoint_path = _relative(save_dir, model_checkpoint_path)
        paths = [_relative(save_dir, p) for p in paths]
    return CheckpointState(str(model_checkpoint_path), [str(p) for p in paths],
                           all_model_checkpoint_timestamps or (), last_preserved_timestamp)


def _relative(save_dir, path) -> str:
    base, path = str(save_dir).rstrip("/") + "/", str(path)
    return path.removeprefix(base)


def update_checkpoint_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None,
                            latest_filename=None, all_model_checkpoint_timestamps=None,
                            last_preserved_timestamp=None) -> None:
    """Write the state file of ``save_dir`` (replaced atomically) naming
    ``model_checkpoint_path`` as the latest checkpoint. The checkpoints must lie in
    ``save_dir`` (tensorvm's state file names them relative to it)."""
    from ..storage.fsio import atomic_write_bytes, join, to_fs
    from ..storage.index import is_plain_name
    filename = latest_filename or "checkpoint"
    state = generate_checkpoint_state_proto(save_dir, model_checkpoint_path,
                                            all_model_checkpoint_paths,
                                            all_model_checkpoint_timestamps,
                                            last_preserved_timestamp)
    state_path = join(save_dir, filename)
    if str(model_checkpoint_path).rstrip("/") == state_path:
        raise RuntimeError(f"Save path '{model_checkpoint_path}' conflicts with path used for "
                           "checkpoint state.  Please use a different save path.")
    state.model_checkpoint_path = _relative(save_dir, state.model_checkpoint_path)
    state.all_model_checkpoint_paths = [_relative(save_dir, p)
                                        for p in state.all_model_checkpoint_paths]
    for p in [state.model_checkpoint_path] + state.all_model_checkpoint_paths:
        if not is_plain_name(p):
            raise errors.InvalidArgumentError(
                f"update_checkpoint_state: checkpoint {p!r} is not in {save_dir} (the state "
                "file names checkpoints of its own folder)")
    now = time.time()
    stamps = state.all_model_checkpoint_timestamps or [now] * len(
        state.all_model_checkpoint_paths)
    doc = {"model_checkpoint_path": state.model_checkpoint_path,
           "all_model_checkpoint_paths": state.all_model_checkpoint_paths,
           "all_model_checkpoint_timestamps": stamps,
           "last_preserved_timestamp": state.last_preserved_timestamp or stamps[0],
           "preserved_checkpoint_paths": []}
    fs, path = to_fs(state_path)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    atomic_write_bytes(fs, path, json.dumps(doc, indent=1).encode())


# ---- reading checkpoints ---------------------------------------------------------------------

class CheckpointReader:
    """TF 1.x's checkpoint reader over one checkpoint (a folder: its latest):
    ``get_tensor``, ``has_tensor``,
    ``get_variable_to_shape_map``, ``get_variable_to_dtype_map``, ``debug_string``. Every
    read verifies its checksums."""

    def __init__(self, path: str):
        try:
            self._path = latest_checkpoint_path(str(path))
            self._vars = dict(list_variables(self._path))
        except (ValueError, FileNotFoundError, errors.NotFoundError) as e:
            raise errors.NotFoundError(f"Unsuccessful TensorSliceReader constructor: Failed to "
                                       f"find any matching files for {path}") from e
        self._dtypes = None

    def has_tensor(self, name: str) -> bool:
        """Whether the checkpoint holds ``name``."""
        return name in self._vars

    def get_tensor(self, name: str) -> np.ndarray:
        """The value of ``name`` (``NotFoundError`` when absent)."""
        if name not in self._vars:
            raise errors.NotFoundError(f"Key {name} not found in checkpoint")
        return load_variable(self._path, name)

    def get_variable_to_shape_map(self) -> dict:
        """``{name: shape list}``."""
        return {k: list(v) for k, v in self._vars.items()}

    def get_variable_to_dtype_map(self) -> dict:
        """``{name: tv.DType}``."""
        if self._dtypes is None:
            from .. import storage
            from ..storage import tensor_bundle
            if _is_tf(self._path):
                aliases = {"float": "float32", "double": "float64", "half": "float16"}
                raw = {k: aliases.get(d[3:].lower(), d[3:].lower())  # "DT_DOUBLE"
                       for k, (d, _) in tensor_bundle.list_bundle(self._path).items()}
            else:
                raw = {e["name"]: ("string" if e["dtype"] in ("|O", "object") or
                                   np.dtype(e["dtype"]).kind in "USO" else
                                   np.dtype(e["dtype"]).name)
                       for e in storage.read_index(self._path)["entries"]}
            self._dtypes = {k: _dt.as_dtype(v) for k, v in raw.items()}
        return dict(self._dtypes)

    def debug_string(self) -> bytes:
        """One ``name (dtype) [shape]`` line per tensor, as bytes (TF's)."""
        dtypes = self.get_variable_to_dtype_map()
        return "".join(f"{k} ({dtypes[k].name}) {v}\n"
                       for k, v in sorted(self._vars.items())).encode()

    def __repr__(self):
        return f"<tv.train.CheckpointReader {self._path!r} ({len(self._vars)} tensors)>"


def NewCheckpointReader(filepattern: str) -> CheckpointReader:
    """A :class:`CheckpointReader` of the checkpoint at ``filepattern`` (or a folder's
    latest); ``NotFoundError``, TF's message, when there is none."""
    return CheckpointReader(filepattern)


def load_checkpoint(ckpt_dir_or_file: str) -> CheckpointReader:
    """A :class:`CheckpointReader` of a checkpoint or of a folder's latest checkpoint."""
    return CheckpointReader(latest_checkpoint_path(str(ckpt_dir_or_file)))


def get_checkpoint_mtimes(checkpoint_prefixes) -> list[float]:
    """The commit times (seconds since the epoch) of the checkpoints that exist among
    ``checkpoint_prefixes`` (missing ones are skipped, as TF's)."""
    from .. import storage
    from ..storage import tensor_bundle
    from ..storage.fsio import to_fs
    out = []
    for prefix in checkpoint_prefixes:
        try:
            stamp = storage.read_index(prefix).get("time")
            if isinstance(stamp, (int, float)):
                out.append(float(stamp))
                continue
        except (storage.CheckpointNotFoundError, FileNotFoundError, storage.DataLossError):
            pass
        if tensor_bundle.is_tf_checkpoint(prefix):
            fs, path = to_fs(tensor_bundle.index_name(prefix))
            modified = fs.modified(path)
            out.append(modified.timestamp() if hasattr(modified, "timestamp")
                       else float(modified))
    return out


def remove_checkpoint(checkpoint_prefix: str, checkpoint_format_version=None,
                      meta_graph_suffix="meta") -> None:
    """Delete a checkpoint (its index first, so it is never seen half deleted) and its meta
    graph file."""
    from ..storage.checkpoint_state import remove_checkpoint as remove
    from ..storage.fsio import to_fs
    remove(checkpoint_prefix)
    fs, path = to_fs(f"{str(checkpoint_prefix).rstrip('/')}.{meta_graph_suffix}")
    if fs.exists(path):
        fs.rm(path)


# ---- init_from_checkpoint ---------------------------------------------------------------------

def _parts(v):
    return list(v._get_variable_list()) if hasattr(v, "_get_variable_list") else v


def _candidates(graph) -> dict:
    """``{name: variable or list of parts}``: the ``get_variable`` store (TF's), then the
    other global variables by name (parts of a partitioned variable under its name)."""
    from ..ops.state.variable_scope import _store
    from ..ops.state.variables import global_variables
    out = {name: _parts(v) for name, v in _store(graph).vars.items()}
    for v in global_variables(graph):
        name = v.op.name
        if "/part_" in name and name[:name.index("/part_")] in out:
            continue
        out.setdefault(name, v)
    return out


def _set_checkpoint_initializer(var, ckpt_file: str, tensor_name: str) -> None:
    """Make ``var``'s initializer (and initial value) a restore of ``tensor_name``: a
    ``RestoreShard`` on the host of its task, then an ``Assign`` colocated with it."""
    from ..framework.op_def_library import apply_op
    from ..framework.tensor_conversion import convert_to_tensor
    from .saver import _host_of, _partition_specs
    parts = var if isinstance(var, list) else [var]
    specs = [s for s, _ in _partition_specs(tensor_name, parts)] if isinstance(var, list) \
        else [None]
    g = parts[0].graph
    with g.as_default(), g.name_scope(None), g.control_dependencies(None):
        for part, spec in zip(parts, specs):
            with g.device(None), g.device(_host_of(part)), \
                    g.name_scope(f"{part.op.name}/checkpoint_initializer/"):
                url = convert_to_tensor(ckpt_file, name="checkpoint_url")
                piece = apply_op("RestoreShard", [url],
                                 {"names": (tensor_name,), "slices": (spec,),
                                  "variables": (dict(part._attrs),)},
                                 name="restore").outputs[0]
            with g.name_scope(f"{part.op.name}/"):
                part._initializer = part.assign(piece, name="checkpoint_initializer").op
            part.initial_value = piece


def _shape_str(dims) -> str:
    """A shape as TF prints a TensorShape: ``(2,)``, ``(2, 3)``."""
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def init_from_checkpoint(ckpt_dir_or_file, assignment_map) -> None:
    """Initialise variables from a checkpoint instead of their initializers (TF 1.x's
    ``tf.train.init_from_checkpoint``; call it before building the init op).

    ``assignment_map`` (a dict or ``(key, value)`` pairs) maps a checkpoint tensor to a
    variable, a variable name or a list of partitions (``'old/w': 'new/w'``), or a checkpoint
    scope to a scope of the graph (``'old/': 'new/'``, ``'/': 'scope/'``): every variable
    under ``scope/`` takes the tensor of the same relative name. A missing tensor, a shape
    mismatch or a scope mapped to a non-scope is ``ValueError`` (TF's messages)."""
    from ..framework.graph import get_default_graph
    from ..ops.state.variables import Variable
    ckpt_file = latest_checkpoint_path(str(ckpt_dir_or_file))
    variable_map = dict(list_variables(ckpt_file))
    items = assignment_map.items() if isinstance(assignment_map, dict) else assignment_map
    store = _candidates(get_default_graph())
    for tensor_name, current in sorted(items, key=lambda kv: kv[0]):
        if isinstance(current, Variable) or hasattr(current, "_get_variable_list") or (
                isinstance(current, list) and current and
                all(isinstance(v, Variable) for v in current)):
            var = _parts(current)
        else:
            var = store.get(current)
        if var is not None:
            if tensor_name not in variable_map:
                raise ValueError(f"Tensor {tensor_name} is not found in {ckpt_dir_or_file} "
                                 f"checkpoint {variable_map}")
            if isinstance(var, Variable):
                have, want = var.shape.dims, variable_map[tensor_name]
                if have is not None and (len(have) != len(want) or any(
                        a is not None and a != b for a, b in zip(have, want))):
                    raise ValueError(f"Shape of variable {var.name} ({_shape_str(have)}) doesn't "
                                     f"match with shape of tensor {tensor_name} "
                                     f"({list(want)}) from checkpoint reader.")
            _set_checkpoint_initializer(var, ckpt_file, tensor_name)
            _log.debug("Initialize variable %s from checkpoint %s with %s", current,
                       ckpt_dir_or_file, tensor_name)
            continue
        scopes = current[:current.rindex("/")] if "/" in current else ""
        if not tensor_name.endswith("/"):
            raise ValueError(f"Assignment map with scope only name {scopes} should map to "
                             f"scope only {tensor_name}. Should be 'scope/': 'other_scope/'.")
        for var_name in sorted(n for n in store if not scopes or n.startswith(scopes + "/")):
            full = var_name[len(scopes):]
            if current != "/":
                full = full[1:]
            if tensor_name != "/":
                full = tensor_name + full
            full = full.rstrip("/")
            if full not in variable_map:
                raise ValueError(f"Tensor {full} ({var_name[len(scopes) + 1:]} in "
                                 f"{tensor_name}) is not found in {ckpt_dir_or_file} "
                                 "checkpoint")
            _set_checkpoint_initializer(store[var_name], ckpt_file, full)


def warm_start_variables(graph, which) -> list:
    """The variables ``vars_to_warm_start`` chooses (TF's rules): a regular expression
    matched against the trainable variables' names, a list of expressions matched against
    every global variable, or a list of variables."""
    import re

    from ..framework.graph_keys import GraphKeys
    from ..ops.state.variables import Variable
    if which is None:
        return []
    if isinstance(which, str):
        pattern = re.compile(which)
        return [v for v in graph.get_collection(GraphKeys.TRAINABLE_VARIABLES)
                if pattern.match(v.op.name)]
    if isinstance(which, (list, tuple)) and all(isinstance(w, str) for w in which):
        out: list = []
        for w in which:
            pattern = re.compile(w)
            out += [v for v in graph.get_collection(GraphKeys.GLOBAL_VARIABLES)
                    if pattern.match(v.op.name) and v not in out]
        return out
    return [v for v in which if isinstance(v, Variable)]


def warm_start(ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
               var_name_to_prev_var_name=None) -> None:
    """Initialise chosen variables from a checkpoint (TF 1.x's ``tf.train.warm_start``, by
    :func:`init_from_checkpoint`): ``vars_to_warm_start`` is a regular expression matched
    against the trainable variables' names, a list of expressions matched against every
    global variable, or a list of variables; ``var_name_to_prev_var_name`` gives a
    variable's name in the checkpoint. Vocabulary remapping (``var_name_to_vocab_info``) is
    not supported (``ValueError``)."""
    from ..framework.graph import get_default_graph
    if var_name_to_vocab_info:
        raise ValueError("warm_start: var_name_to_vocab_info (vocabulary remapping) is not "
                         "supported by tensorvm")
    prev = dict(var_name_to_prev_var_name or {})
    g = get_default_graph()
    candidates = _candidates(g)
    chosen: dict = {}
    for v in warm_start_variables(g, vars_to_warm_start):
        name = v.op.name
        base = name[:name.index("/part_")] if "/part_" in name else name
        if base != name and isinstance(candidates.get(base), list):
            chosen[base] = candidates[base]  # a partitioned variable, as one tensor
        else:
            chosen[name] = v
    _log.info("Warm-starting from: %s", ckpt_to_initialize_from)
    assignment = {prev.pop(name, name): var for name, var in chosen.items()}
    if prev:
        raise ValueError("You provided the following variables in var_name_to_prev_var_name "
                         f"that were not used: {prev}.  Perhaps you misspelled them?  Here "
                         f"is the list of viable variable names: {sorted(chosen)}")
    if assignment:
        init_from_checkpoint(ckpt_to_initialize_from, assignment)


# ---- waiting for checkpoints, event files, graphs -----------------------------------------------

def wait_for_new_checkpoint(checkpoint_dir, last_checkpoint=None, seconds_to_sleep=1,
                            timeout=None):
    """The path of the newest committed checkpoint of ``checkpoint_dir`` once it differs
    from ``last_checkpoint``, polling every ``seconds_to_sleep``; ``None`` after
    ``timeout`` seconds."""
    from .saver import latest_checkpoint
    _log.info("Waiting for new checkpoint at %s", checkpoint_dir)
    stop_time = time.time() + timeout if timeout is not None else None
    while True:
        path = latest_checkpoint(checkpoint_dir)
        if path is not None and path != last_checkpoint:
            _log.info("Found new checkpoint at %s", path)
            return path
        if stop_time is not None and time.time() + seconds_to_sleep > stop_time:
            return None
        time.sleep(seconds_to_sleep)


def checkpoints_iterator(checkpoint_dir, min_interval_secs=0, timeout=None, timeout_fn=None):
    """Yield each new checkpoint of ``checkpoint_dir`` as it is committed (the latest one
    first), at most one per ``min_interval_secs``. When none comes within ``timeout``
    seconds, stop — or, with ``timeout_fn``, stop only if it returns true (TF's rule)."""
    checkpoint_path = None
    while True:
        new = wait_for_new_checkpoint(checkpoint_dir, checkpoint_path, timeout=timeout)
        if new is None:
            if not timeout_fn:
                _log.info("Timed-out waiting for a checkpoint.")
                return
            if timeout_fn():
                return
            continue
        start = time.time()
        checkpoint_path = new
        yield checkpoint_path
        wait = start + min_interval_secs - time.time()
        if wait > 0:
            time.sleep(wait)


def summary_iterator(path):
    """The ``Event`` records of the event file at ``path`` (any fsspec URL), in order; a
    corrupt record is ``DataLossError`` (raised by storage, naming the file)."""
    from ..storage.fsio import to_fs
    from ..storage.tfrecord import iter_records
    from ..tf_api.summary import Event
    fs, local = to_fs(str(path))
    try:
        f = fs.open(local, "rb")
    except FileNotFoundError:
        raise errors.NotFoundError(f"{path}; No such file or directory") from None
    with f:
        for _, record in iter_records(f, str(path)):
            yield Event.FromString(record)


def write_graph(graph_or_graph_def, logdir, name, as_text=True) -> str:
    """Write a graph to ``logdir/name`` (any fsspec URL; the folder is made) and return the
    path. A ``tv.Graph`` or its ``as_graph_def()`` dict: ``as_text`` writes tensorvm's JSON
    GraphDef (what ``tv.Graph.as_graph_def`` gives, read back by tensorvm), else a binary
    ``GraphDef`` protobuf of names, ops, inputs and devices (what TensorBoard draws). A
    protobuf message is written in protobuf text or binary format."""
    from ..framework.graph import Graph
    from ..framework.graph_def import graph_to_dict
    from ..storage.fsio import atomic_write_bytes, join, to_fs
    g = graph_or_graph_def
    if isinstance(g, Graph):
        data = json.dumps(graph_to_dict(g), indent=1).encode() if as_text else None
        if data is None:
            from ..tf_api.summary import graph_def_bytes
            data = graph_def_bytes(g)
    elif isinstance(g, dict):
        if not as_text:
            from ..framework.graph_def import graph_from_dict
            from ..tf_api.summary import graph_def_bytes
            data = graph_def_bytes(graph_from_dict(g))
        else:
            data = json.dumps(g, indent=1).encode()
    elif hasattr(g, "SerializeToString"):
        if as_text:
            from google.protobuf import text_format
            data = text_format.MessageToString(g).encode()
        else:
            data = g.SerializeToString()
    else:
        raise TypeError(f"write_graph expects a tv.Graph, a GraphDef dict or a protobuf "
                        f"message, got {type(g).__name__}")
    path = join(str(logdir), name)
    fs, local = to_fs(path)
    fs.makedirs(local.rsplit("/", 1)[0], exist_ok=True)
    atomic_write_bytes(fs, local, data)
    return path
