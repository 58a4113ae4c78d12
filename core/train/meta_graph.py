"""``tv.train.export_meta_graph`` / ``import_meta_graph``: a graph, its collections and its
Saver as one JSON file (TF 1.x's MetaGraphDef), to rebuild the graph in another process.

The file is plain data: the GraphDef of :mod:`tensorvm.framework.graph_def` (functions such as a
``while_loop``'s cond and body, or a dataset's ``map`` function, as nested graph definitions;
NumPy constants as dtype/shape/base64), the collections by name (variables, tensors and
operations by their names; strings and numbers as they are) and the ``saver_def`` naming the
Saver's ops. Nothing is ever unpickled or executed from the file; a graph holding Python code
(``py_func``, ``Dataset.from_generator``) is refused at export, naming the op.

>>> import tensorvm as tv
>>> g = tv.Graph()
>>> with g.as_default():
...     i = tv.while_loop(lambda i: i < 4, lambda i: i + 1, [0])
...     _ = tv.identity(i, name="out")
...     meta = tv.train.export_meta_graph()
>>> with tv.Graph().as_default() as g2:
...     _ = tv.train.import_meta_graph(meta)
...     with tv.Session() as s: int(s.run("out:0"))
4
"""
from __future__ import annotations

import json
import logging

from ..framework import errors
from ..framework.graph import Operation, Tensor, get_default_graph
from ..framework.graph_def import graph_from_dict, graph_to_dict
from ..ops.state.variables import Variable

__all__ = ["export_meta_graph", "load_meta_graph"]

_log = logging.getLogger("tensorvm")
FORMAT = "tensorvm.MetaGraphDef"
#: bytes a meta graph file may have (TF's MetaGraphDef, a protobuf, stops at 2 GiB); a larger
#: one, or one that is not a regular file, is ``DataLossError`` before anything is read
MAX_META_GRAPH_BYTES = 512 << 20


# ---- collections ------------------------------------------------------------------------------

def _item_to_plain(item):
    """One collection item as data, or None where it is not data (skipped, as TF skips)."""
    if isinstance(item, Variable):
        return {"variable": item.op.name, "initializer": item.initializer.name,
                "initial_value": item.initial_value.name, "trainable": bool(item.trainable)}
    if isinstance(item, Tensor):
        return {"tensor": item.name}
    if isinstance(item, Operation):
        return {"operation": item.name}
    if item is None or isinstance(item, (bool, int, float, str)):
        return {"value": item}
    from .queue_runner import QueueRunner
    if isinstance(item, QueueRunner):  # TF's QueueRunnerDef
        return {"queue_runner": {
            "queue": item.queue.name, "enqueue_ops": [op.name for op in item.enqueue_ops],
            "close_op": item.close_op.name, "cancel_op": item.cancel_op.name,
            "closed_types": [c.__name__ for c in item._closed_types]}}
    return None


def _queue_from_op(graph, name: str):
    """The queue object whose ``*QueueV2`` op is ``name`` (no op is added)."""
    from ..ops.state import data_flow_ops as dfo
    op = graph.get_operation_by_name(name)
    kinds = {c._op_type: c for c in (dfo.FIFOQueue, dfo.PaddingFIFOQueue,
                                      dfo.RandomShuffleQueue, dfo.PriorityQueue)}
    cls = kinds.get(op.type)
    if cls is None:
        raise errors.InvalidArgumentError(f"queue runner: {name!r} is a {op.type}, not a queue")
    q = cls.__new__(cls)
    spec = op.attrs["queue"]
    q._dtypes, q._names, q._shapes = tuple(spec["dtypes"]), None, spec["shapes"]
    q._spec, q._op, q._name = spec, op, op.name
    return q


def _queue_runner_from_plain(graph, d: dict):
    import threading

    from .queue_runner import QueueRunner
    qr = QueueRunner.__new__(QueueRunner)
    qr.queue = _queue_from_op(graph, d["queue"])
    qr.enqueue_ops = [graph.get_operation_by_name(n) for n in d["enqueue_ops"]]
    qr.close_op = graph.get_operation_by_name(d["close_op"])
    qr.cancel_op = graph.get_operation_by_name(d["cancel_op"])
    types = []
    for n in d.get("closed_types", ()):
        cls = getattr(errors, str(n), None)
        if not (isinstance(cls, type) and issubclass(cls, errors.OpError)):
            raise errors.InvalidArgumentError(f"queue runner: {n!r} is not a tv.errors class")
        types.append(cls)
    qr._closed_types = tuple(types)
    qr._lock = threading.Lock()
    qr._runs = 0
    qr.exceptions = []
    return qr


def _collections_to_plain(graph, keys) -> dict:
    out = {}
    for key in keys:
        if not isinstance(key, str):
            continue
        items = []
        for item in graph.get_collection(key):
            plain = _item_to_plain(item)
            if plain is None:
                _log.info("export_meta_graph: collection %r holds a %s, which is not data; it "
                          "is left out", key, type(item).__name__)
                items = None
                break
            items.append(plain)
        if items is not None:
            out[key] = items
    return out


def _variable_from_op(graph, d: dict, trainable: bool) -> Variable:
    """The :class:`Variable` whose ops ``d`` names (no op is added to the graph)."""
    op = graph.get_operation_by_name(d["variable"])
    if op.type != "VariableV2":
        raise errors.InvalidArgumentError(f"collection item {d['variable']!r} is a {op.type}, "
                                          "not a variable")
    v = Variable.__new__(Variable)
    v.graph = graph
    v._attrs = {k: op.attrs.get(k) for k in ("var_name", "container", "dtype", "shape")}
    v._op = op
    v._value = op.outputs[0]
    v._initializer = graph.get_operation_by_name(d["initializer"])
    v.initial_value = graph.get_tensor_by_name(d["initial_value"])
    v.trainable = trainable
    return v


def _restore_collections(graph, coll: dict) -> None:
    if not isinstance(coll, dict):
        raise errors.InvalidArgumentError("meta graph: 'collection_def' must be a dict")
    variables: dict[str, Variable] = {}
    for key, items in coll.items():
        if not isinstance(items, list):
            raise errors.InvalidArgumentError(f"meta graph: collection {key!r} is not a list")
        for d in items:
            try:
                if "variable" in d:
                    v = variables.get(d["variable"])
                    if v is None:
                        v = variables[d["variable"]] = _variable_from_op(
                            graph, d, bool(d.get("trainable", True)))
                    graph.add_to_collection(key, v)
                elif "tensor" in d:
                    graph.add_to_collection(key, graph.get_tensor_by_name(d["tensor"]))
                elif "queue_runner" in d:
                    graph.add_to_collection(key, _queue_runner_from_plain(graph,
                                                                          d["queue_runner"]))
                elif "operation" in d:
                    graph.add_to_collection(key, graph.get_operation_by_name(d["operation"]))
                elif "value" in d and (d["value"] is None or
                                       isinstance(d["value"], (bool, int, float, str))):
                    graph.add_to_collection(key, d["value"])
                else:
                    raise errors.InvalidArgumentError(f"bad item {str(d)[:80]!r}")
            except errors.InvalidArgumentError:
                raise
            except (errors.NotFoundError, TypeError, KeyError, ValueError, AttributeError,
                    IndexError) as e:
                raise errors.InvalidArgumentError(
                    f"meta graph: collection {key!r} names a missing or bad node: {e}") \
                    from None


# ---- export / import --------------------------------------------------------------------------

def _version() -> str:
    """The installed tensorvm's version (from its metadata: importing the package from here
    would close an import circle through tensorvm.train)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("tensorvm")
    except PackageNotFoundError:
        return "unknown"


def export_meta_graph(filename=None, meta_info_def=None, graph_def=None, saver_def=None,
                      collection_list=None, as_text=False, graph=None, export_scope=None,
                      clear_devices=False, clear_extraneous_savers=False,
                      strip_default_attrs=False, **_ignored) -> dict:
    """The graph (default: the default graph), its collections (``collection_list``: all)
    and ``saver_def`` as one JSON-able dict, written to ``filename`` (an fsspec URL) when
    given. Raises ``InvalidArgumentError`` naming the op for a graph holding Python code
    (``py_func``, ``Dataset.from_generator``)."""
    g = graph or get_default_graph()
    if export_scope:
        raise errors.InvalidArgumentError("export_meta_graph: export_scope is not supported; "
                                          "export the whole graph")
    gd = graph_def if graph_def is not None else graph_to_dict(g)
    if clear_devices:
        gd = dict(gd, node=[dict(n, device="") for n in gd["node"]])
    keys = list(g._collections) if collection_list is None else collection_list
    meta = {"format": FORMAT, "version": 1,
            "meta_info_def": {"tensorvm_version": _version(), **(meta_info_def or {})},
            "graph_def": gd, "collection_def": _collections_to_plain(g, keys),
            "saver_def": saver_def}
    if filename is not None:
        write_meta_graph_bytes(filename, meta_graph_bytes(meta))
    return meta


def meta_graph_bytes(meta: dict) -> bytes:
    """``export_meta_graph``'s dict as the file's bytes (compact JSON, UTF-8)."""
    return json.dumps(meta, separators=(",", ":")).encode()


def write_meta_graph_bytes(filename, data: bytes) -> None:
    """Write a meta graph file (an fsspec URL), all or nothing."""
    from ..storage.fsio import atomic_write_bytes, to_fs
    fs, path = to_fs(str(filename))
    parent = path.rstrip("/").rpartition("/")[0]
    if parent:
        fs.makedirs(parent, exist_ok=True)
    atomic_write_bytes(fs, path, data)


def read_meta_graph_file(filename) -> dict:
    """The meta graph dict in ``filename`` (an fsspec URL): ``NotFoundError`` if absent,
    ``DataLossError`` if it is not valid JSON (truncated or corrupt), not a regular file (a
    FIFO, a device) or larger than :data:`MAX_META_GRAPH_BYTES` (refused before it is read)."""
    from ..storage.fsio import read_bytes, to_fs
    fs, path = to_fs(str(filename))
    try:
        raw = read_bytes(fs, path, MAX_META_GRAPH_BYTES, str(filename))
    except FileNotFoundError:
        raise errors.NotFoundError(f"meta graph file {str(filename)!r} does not exist") \
            from None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise errors.DataLossError(
            f"meta graph file {str(filename)!r} is not a valid tensorvm meta graph (truncated "
            f"or corrupt JSON: {e})") from None


def load_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None):
    """Add the graph of a meta graph (a file URL or ``export_meta_graph``'s dict) to the
    default graph and restore its collections; returns the graph and the meta graph's
    ``saver_def`` (None without one). ``tv.train.import_meta_graph`` (in
    :mod:`tensorvm.train.saver`, which builds the Saver) calls it. Bad input raises
    ``InvalidArgumentError`` (``DataLossError`` for a corrupt file, ``NotFoundError`` for a
    missing one); nothing from the file is executed or unpickled."""
    if import_scope:
        raise errors.InvalidArgumentError("import_meta_graph: import_scope is not supported; "
                                          "import into a fresh graph")
    meta = meta_graph_or_file if isinstance(meta_graph_or_file, dict) else \
        read_meta_graph_file(meta_graph_or_file)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise errors.InvalidArgumentError("import_meta_graph: the input is not a tensorvm meta "
                                          "graph (written by tv.train.export_meta_graph)")
    g = get_default_graph()
    gd = meta.get("graph_def")
    if isinstance(gd, dict) and gd.get("seed") is not None and g.seed is None:
        g.seed = gd["seed"]
    graph_from_dict(gd, graph=g, clear_devices=clear_devices)
    _restore_collections(g, meta.get("collection_def") or {})
    return g, meta.get("saver_def") or None
