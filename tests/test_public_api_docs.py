"""Every public function and class a user reaches from tensorvm's namespaces has a docstring,
and so has every public method and property of those classes.

Public: the names in a namespace's ``__all__``, else its names without a leading underscore,
that are functions, classes or other callables defined in tensorvm (re-exported NumPy or Dask
objects are theirs to document). A class must have a docstring of its own, not only its base's;
a method or property defined in a class may take its docstring from the one it overrides.
"""
import importlib
import inspect
import types

import pytest

NAMESPACES = ["tensorvm", "tensorvm.train", "tensorvm.nn", "tensorvm.tf_api.data", "tensorvm.tf_api.layers",
              "tensorvm.mapreduce", "tensorvm.storage"]

# Names whose docstrings live in files other engineers own right now; remove an entry when its
# docstring is written (the test below fails on an entry that no longer needs to be here).
ALLOWED_MISSING: set[str] = set()


def _namespace(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:  # tensorvm.nn and the like are attributes, not modules
        parent, _, attr = name.rpartition(".")
        return getattr(importlib.import_module(parent), attr)


def _public(ns) -> dict[str, object]:
    names = getattr(ns, "__all__", None)
    if names is None:
        names = [n for n in dir(ns) if not n.startswith("_")]
    out = {}
    for n in names:
        obj = getattr(ns, n)
        if isinstance(obj, types.ModuleType) or not callable(obj):
            continue
        if not (getattr(obj, "__module__", None) or "").startswith("tensorvm"):
            continue
        out[n] = obj
    return out


# Methods and properties whose docstrings live in files other engineers own right now (the same
# rule as above: an entry that gets its docstring must leave this set).
ALLOWED_MISSING_MEMBERS = {
    # core/ops/dataset_ops.py
    "Dataset.output_classes", "Dataset.output_shapes", "Dataset.output_types",
    # core/ops/iterator_ops.py
    "Iterator.initializer", "Iterator.name", "Iterator.output_classes", "Iterator.output_shapes",
    "Iterator.output_types",
    # core/ops/tensor_array.py
    "TensorArray.dtype", "TensorArray.dynamic_size", "TensorArray.element_shape",
    # core/train/hooks.py
    "CheckpointSaverHook.after_create_session", "CheckpointSaverHook.after_run",
    "CheckpointSaverHook.before_run", "CheckpointSaverHook.begin", "CheckpointSaverHook.end",
    "CheckpointSaverListener.after_save", "CheckpointSaverListener.before_save",
    "CheckpointSaverListener.begin", "CheckpointSaverListener.end", "LoggingTensorHook.after_run",
    "LoggingTensorHook.before_run", "LoggingTensorHook.end", "NanTensorHook.after_run",
    "NanTensorHook.before_run", "SessionRunContext.request_stop",
    "SessionRunHook.after_create_session", "SessionRunHook.after_run",
    "SessionRunHook.before_run", "SessionRunHook.begin", "SessionRunHook.end",
    "StepCounterHook.after_create_session", "StepCounterHook.after_run",
    "StepCounterHook.before_run", "StepCounterHook.begin", "StepCounterHook.end",
    "StopAtStepHook.after_create_session", "StopAtStepHook.after_run",
    "StopAtStepHook.before_run", "StopAtStepHook.begin", "SummarySaverHook.after_run",
    "SummarySaverHook.before_run", "SummarySaverHook.begin", "SummarySaverHook.end",
    # core/train/monitored_session.py
    "MonitoredSession.close", "MonitoredSession.run_step_fn", "MonitoredSession.should_stop",
    "Scaffold.finalize",
    # core/train/replicas.py
    "TrainResult.steps_per_s",
    # core/train/server.py
    "Server.cluster_spec",
    # core/train/supervisor.py
    "Supervisor.coord", "Supervisor.global_step", "Supervisor.init_feed_dict",
    "Supervisor.init_op", "Supervisor.is_chief", "Supervisor.ready_op", "Supervisor.request_stop",
    "Supervisor.save_model_secs", "Supervisor.save_path", "Supervisor.save_summaries_secs",
    "Supervisor.saver", "Supervisor.session_manager", "Supervisor.should_stop",
    "Supervisor.start_queue_runners", "Supervisor.summary_computed", "Supervisor.summary_op",
    "Supervisor.summary_writer", "Supervisor.wait_for_stop",
    # core/train/sync_replicas.py
    "SyncReplicasOptimizer.make_session_run_hook", "SyncReplicasOptimizer.replicas_to_aggregate",
    "SyncReplicasOptimizer.total_num_replicas",
}


def _member_doc(member):
    if isinstance(member, property):  # its doc= or its getter's docstring
        return member.__doc__
    return getattr(getattr(member, "__func__", member), "__doc__", None)


def _missing_members() -> set[str]:
    """``Class.member`` for each public method or property defined (not inherited) in a public
    class with no docstring, its own or that of the base-class member it overrides."""
    out, seen = set(), set()
    for ns_name in NAMESPACES:
        for cls in _public(_namespace(ns_name)).values():
            if not inspect.isclass(cls) or cls in seen:
                continue
            seen.add(cls)
            for name, member in vars(cls).items():
                if name.startswith("_") or not (isinstance(member, property) or callable(member)
                                                or isinstance(member, (staticmethod,
                                                                       classmethod))):
                    continue
                if inspect.isclass(member) or (_member_doc(member) or "").strip():
                    continue
                if any((_member_doc(vars(b)[name]) or "").strip()
                       for b in cls.__mro__[1:] if name in vars(b) and b is not object):
                    continue
                out.add(f"{cls.__name__}.{name}")
    return out


def _documented(obj) -> bool:
    doc = obj.__doc__ if inspect.isclass(obj) else inspect.getdoc(obj)
    return bool((doc or "").strip())


def _missing() -> dict[str, str]:
    out = {}
    for ns_name in NAMESPACES:
        for n, obj in _public(_namespace(ns_name)).items():
            if not _documented(obj):
                try:
                    where = inspect.getsourcefile(obj) or "?"
                except TypeError:
                    where = "?"
                out[f"{ns_name}.{n}"] = where
    return out


def test_the_namespaces_are_searched():
    found = {ns: len(_public(_namespace(ns))) for ns in NAMESPACES}
    assert all(n > 0 for n in found.values()), found
    assert found["tensorvm"] > 200, found


def test_every_public_callable_has_a_docstring():
    missing = {k: v for k, v in _missing().items() if k not in ALLOWED_MISSING}
    assert not missing, "public API without a docstring:\n" + "\n".join(
        f"  {k}  ({v})" for k, v in sorted(missing.items()))


def test_the_allow_list_holds_only_undocumented_names():
    stale = sorted(ALLOWED_MISSING - set(_missing()))
    assert not stale, f"documented now, remove from ALLOWED_MISSING: {stale}"


def test_every_public_method_and_property_has_a_docstring():
    missing = sorted(_missing_members() - ALLOWED_MISSING_MEMBERS)
    assert not missing, "public methods/properties without a docstring:\n  " + \
        "\n  ".join(missing)


def test_the_members_allow_list_holds_only_undocumented_members():
    stale = sorted(ALLOWED_MISSING_MEMBERS - _missing_members())
    assert not stale, f"documented now, remove from ALLOWED_MISSING_MEMBERS: {stale}"


def test_a_property_documented_with_doc_counts():
    class C:
        documented = property(lambda self: 1, doc="One.")
        bare = property(lambda self: 2)

    assert _member_doc(vars(C)["documented"]) == "One."
    assert not _member_doc(vars(C)["bare"])


@pytest.mark.parametrize("obj", [lambda: None, type("C", (), {})])
def test_an_undocumented_object_is_caught(obj):
    assert not _documented(obj)
