"""Run a TensorFlow 1.x program unchanged: ``import tensorflow as tf`` resolves to tensorvm.

:func:`install` puts a finder first on ``sys.meta_path`` that answers every import of
``tensorflow`` and ``tensorflow.*`` with tensorvm's module or attribute of the same path:

* ``tensorflow`` and ``tensorflow.compat.v1`` -> ``tensorvm`` (TF 1.x's API; TF 2 programs that
  say ``import tensorflow.compat.v1 as tf`` and ``tf.disable_v2_behavior()`` get it too);
  ``tensorflow.compat.v1.X`` is ``tensorflow.X``;
* ``tensorflow.X.Y`` -> ``tensorvm.X.Y`` (an attribute path, else the submodule
  ``tensorvm.X.Y``): ``tensorflow.contrib.rnn`` is ``tv.contrib.rnn``,
  ``tensorflow.estimator`` is ``tv.estimator`` where tensorvm has one;
* ``tensorflow.examples.tutorials.mnist.input_data`` -> :mod:`tensorvm.tutorials.mnist.input_data`
  (MNIST's IDX ``.gz`` files read from the directory given, no download), and
  ``...mnist.mnist`` -> the ``mnist.py`` beside the program being run (as in TF's source tree),
  else :mod:`tensorvm.tutorials.mnist.mnist`;
* ``tensorflow.python.client.timeline`` -> :mod:`tensorvm.runtime.timeline` (the one module of TF's
  private ``tensorflow.python`` that its tutorials import).

A name tensorvm lacks fails at the import with ``ModuleNotFoundError`` naming it. Each
imported name is a small proxy module forwarding attribute reads to its tensorvm object, so
the import system never writes into tensorvm's own modules. Nothing happens on
``import tensorvm``: the finder is installed only by :func:`install` (and by
:func:`run_program`, ``tensorvm tf PROGRAM.py``, ``python -m tensorvm.tf_api.tf_shim PROGRAM.py``),
and it shadows an installed TensorFlow only then.

>>> from tensorvm import tf_shim
>>> tf_shim.install()
>>> import tensorflow as tf
>>> import tensorvm as tv
>>> tf.placeholder is tv.placeholder, tf.compat.v1.Session is tv.Session
(True, True)
>>> import tensorflow.nosuchthing  # doctest: +ELLIPSIS
Traceback (most recent call last):
ModuleNotFoundError: No module named 'tensorflow.nosuchthing': tensorvm, which runs ...
>>> tf_shim.uninstall()
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import types

__all__ = ["PROGRAM_ENV", "RANGE_LIMIT_ENV", "TF_API_VERSION", "install", "installed", "main", "resolve",
           "run_program", "uninstall"]

logger = logging.getLogger("tensorvm")

RANGE_LIMIT_ENV = "TENSORVM_TF_RANGE_LIMIT"
"""Testing knob of :func:`run_program`: with ``TENSORVM_TF_RANGE_LIMIT=N`` set, the program
file's own ``range(n)`` with ``n > N`` counts to ``N`` only (for tutorials that hard-code
20000 steps and have no flag for it). It changes what the program does: never set it
otherwise."""

_ROOT = "tensorflow"
_MNIST = "tensorflow.examples.tutorials.mnist"
# Names of TF's package that are no attribute path of tensorvm.
_SPECIAL = {
    "tensorflow": "tensorvm",
    "tensorflow.compat.v1": "tensorvm",
    "tensorflow.examples": "tensorvm.tutorials",
    "tensorflow.examples.tutorials": "tensorvm.tutorials",
    _MNIST: "tensorvm.tutorials.mnist",
    _MNIST + ".input_data": "tensorvm.tutorials.mnist.input_data",
    # tensorflow.python.*: only the modules TF's own tutorials import
    "tensorflow.python": "tensorvm",
    "tensorflow.python.client": "tensorvm",
    "tensorflow.python.client.timeline": "tensorvm.runtime.timeline",
}
_REFUSED = {
    "tensorflow.compat.v2": "tensorvm implements TensorFlow 1.x's graph API "
                            "(tensorflow.compat.v1), not TF 2's",
}


TF_API_VERSION = "1.15.0"
"""What ``tf.__version__`` and ``tf.VERSION`` say under the shim: the TensorFlow API that
tensorvm implements (programs compare it to pick their code paths); tensorvm's own version is
``tf.__tensorvm_version__``."""
_VERSIONS = {"__version__": TF_API_VERSION, "VERSION": TF_API_VERSION,
             "GIT_VERSION": f"tensorvm-{TF_API_VERSION}", "COMPILER_VERSION": "tensorvm",
             "GRAPH_DEF_VERSION": 26, "__tensorvm_version__": None}


class ShimModule(types.ModuleType):
    """``sys.modules['tensorflow…']``: reads of a missing attribute go to ``__target__``
    (the tensorvm module or object this name stands for)."""

    def __getattr__(self, name):
        target = self.__dict__.get("__target__")
        if self.__name__ == _MNIST and name == "mnist":  # the program's own mnist.py first
            return importlib.import_module(_MNIST + ".mnist")
        if name in _VERSIONS and getattr(target, "__name__", None) == "tensorvm":
            return _VERSIONS[name] or target.__version__
        if name == "__all__" and target is not None:  # ``from tensorflow import *``
            return list(getattr(target, "__all__", None)
                        or [n for n in dir(target) if not n.startswith("_")])
        if name == "__file__" and target is not None:
            return getattr(target, "__file__", None)
        if target is None or name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        try:
            return getattr(target, name)
        except AttributeError:
            raise AttributeError(
                f"module {self.__name__!r} has no attribute {name!r} (tensorvm, which runs "
                f"this program in TensorFlow's place, has no {_tv_name(self.__name__)}."
                f"{name})") from None

    def __dir__(self):
        return sorted(set(dir(self.__dict__.get("__target__"))) | set(self.__dict__))

    def __repr__(self):
        return f"<module {self.__name__!r} (tensorvm shim for {_tv_name(self.__name__)})>"


def _tv_name(fullname: str) -> str:
    """``tensorflow.compat.v1.nn`` -> ``tensorvm.nn`` (for messages)."""
    rest = _strip(fullname)
    return "tensorvm" + (f".{rest}" if rest else "")


def _strip(fullname: str) -> str:
    """The path below the package: ``tensorflow.compat.v1.a.b`` and ``tensorflow.a.b`` ->
    ``a.b``."""
    for prefix in ("tensorflow.compat.v1", _ROOT):
        if fullname == prefix:
            return ""
        if fullname.startswith(prefix + "."):
            return fullname[len(prefix) + 1:]
    raise ValueError(f"{fullname!r} is not a tensorflow name")


def _missing(fullname: str, why: str) -> ModuleNotFoundError:
    # ``name`` is tensorvm's missing module, not ``fullname``: ``from tensorflow.x import y``
    # would otherwise turn this message into a bare "cannot import name 'y'"
    return ModuleNotFoundError(
        f"No module named {fullname!r}: tensorvm, which runs this program in TensorFlow's "
        f"place, {why}", name=_tv_name(fullname))


def _sibling_mnist():
    """TF's ``mnist.py`` beside the ``__main__`` program (the tutorials' own model module),
    loaded under a private name; None where there is none."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if not main_file:
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(main_file)), "mnist.py")
    if not os.path.isfile(path) or os.path.abspath(path) == os.path.abspath(main_file):
        return None
    name = "_tensorvm_tf_program_mnist"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == path:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def resolve(fullname: str):
    """The tensorvm module or object that ``tensorflow`` name ``fullname`` stands for.

    Raises ``ModuleNotFoundError`` (naming ``fullname`` and what tensorvm lacks) for a name
    tensorvm does not implement.

    >>> import tensorvm as tv
    >>> resolve("tensorflow.compat.v1.nn") is tv.nn, resolve("tensorflow.contrib.rnn") is tv.contrib.rnn
    (True, True)
    """
    for prefix, why in _REFUSED.items():
        if fullname == prefix or fullname.startswith(prefix + "."):
            raise _missing(fullname, why)
    if fullname in _SPECIAL:
        return importlib.import_module(_SPECIAL[fullname])
    if fullname == _MNIST + ".mnist":
        return _sibling_mnist() or importlib.import_module("tensorvm.tutorials.mnist.mnist")
    rest = _strip(fullname)
    if rest in ("compat.v1", "") or fullname.startswith("tensorflow.compat.v1."):
        return resolve(_ROOT + ("." + rest if rest else ""))
    obj = importlib.import_module("tensorvm")
    done = []
    for part in rest.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            try:  # a submodule that tensorvm imports lazily (tensorvm.estimator ...)
                obj = importlib.import_module(".".join(["tensorvm", *done, part]))
            except ModuleNotFoundError as e:
                if e.name is None or not (e.name == ".".join(["tensorvm", *done, part])
                                          or ".".join(["tensorvm", *done, part]).startswith(
                                              e.name + ".")):
                    raise  # a real missing dependency inside tensorvm's module
                raise _missing(fullname, f"has no {'.'.join(['tensorvm', *done, part])}") \
                    from None
        done.append(part)
    return obj


class TensorFlowFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The meta-path finder and loader of ``tensorflow`` names (see the module docstring)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _ROOT and not fullname.startswith(_ROOT + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = ShimModule(spec.name)
        module.__target__ = resolve(spec.name)  # an unknown name fails here
        return module

    def exec_module(self, module):
        target = module.__dict__["__target__"]
        module.__doc__ = getattr(target, "__doc__", None)
        module.__path__ = []  # a package: ``import tensorflow.x.y`` asks this finder again


_FINDER = TensorFlowFinder()


def installed() -> bool:
    """Whether the finder is on ``sys.meta_path``."""
    return _FINDER in sys.meta_path


def install() -> None:
    """Put the ``tensorflow`` finder first on ``sys.meta_path`` (idempotent).

    It shadows a TensorFlow installed in this environment from now on (that is what asking
    for it means). A real TensorFlow already imported in this process cannot be replaced:
    that is a ``RuntimeError``."""
    if installed():
        return
    real = sys.modules.get(_ROOT)
    if real is not None and not isinstance(real, ShimModule):
        raise RuntimeError("tensorflow is already imported in this process "
                           f"({getattr(real, '__file__', real)!r}): the tensorvm shim must "
                           "be installed before the program imports tensorflow")
    if importlib.machinery.PathFinder.find_spec(_ROOT) is not None:
        logger.info("tensorvm: 'import tensorflow' now gives tensorvm (an installed "
                    "TensorFlow is shadowed in this process)")
    sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    """Remove the finder and forget every ``tensorflow`` module it made."""
    while _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [n for n, m in sys.modules.items() if isinstance(m, ShimModule)]:
        del sys.modules[name]
    sys.modules.pop("_tensorvm_tf_program_mnist", None)


def _range_limited(limit: int):
    builtin_range = range

    def limited_range(*args):
        """``range``, counting to at most TENSORVM_TF_RANGE_LIMIT (a testing knob)."""
        r = builtin_range(*args)
        return r if len(r) <= limit else r[:limit]
    return limited_range


class UsageError(Exception):
    """Bad use of the runner (no such program file): exit status 2, one line."""


PROGRAM_ENV = "TENSORVM_TF_PROGRAM"
"""Set by :func:`run_program` to the program's path, for the processes it spawns."""


def _init_globals(warn: bool) -> dict:
    limit = os.environ.get(RANGE_LIMIT_ENV)
    if not limit:
        return {}
    try:
        init = {"range": _range_limited(int(limit))}
    except ValueError:
        raise UsageError(f"{RANGE_LIMIT_ENV} must be an integer, got {limit!r}") from None
    if warn:
        logger.warning("tensorvm: %s=%s: the program's loops stop after %s iterations",
                       RANGE_LIMIT_ENV, limit, limit)
    return init


def _exec_program(path: str, run_name: str, init_globals: dict) -> types.ModuleType:
    """Run the file ``path`` as module ``run_name`` (``sys.modules[run_name]`` meanwhile) and
    return it. As ``__main__``, its ``__spec__`` names this module: a process that
    multiprocessing spawns from the program (Dask's workers) imports this module as its
    ``__mp_main__``, which installs the shim before it runs the program's code (see the end of
    this file); with the file's own path, its ``import tensorflow`` would fail there."""
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    module = types.ModuleType(run_name)
    module.__dict__.update(init_globals)
    module.__file__ = path
    module.__cached__ = None
    module.__loader__ = None
    module.__package__ = None
    module.__spec__ = importlib.util.find_spec(__spec__.name if __spec__ else __name__) \
        if run_name == "__main__" else None
    saved = sys.modules.get(run_name)
    sys.modules[run_name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102  (running the user's program is the point)
    finally:
        if saved is None:
            sys.modules.pop(run_name, None)
        else:
            sys.modules[run_name] = saved
    return module


def run_program(path: str, args: list[str] | tuple = ()) -> None:
    """Run the Python file ``path`` as ``__main__`` with ``sys.argv = [path, *args]`` and the
    shim installed, as ``python path args...`` would with TensorFlow installed; its
    directory comes first on ``sys.path``, and the processes it spawns (a LocalCluster's
    workers) get the shim too. ``SystemExit`` (``tf.app.run``'s) passes through. Meant for a
    process of its own (the ``tensorvm tf`` command): the shim stays installed."""
    if not os.path.isfile(path):
        raise UsageError(f"no such program file: {path}")
    init_globals = _init_globals(warn=True)
    install()
    os.environ[PROGRAM_ENV] = os.path.abspath(path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    _exec_program(path, "__main__", init_globals)


def _spawned_program_namespace() -> dict:
    """In a process the program spawned: the program's module namespace, run as
    ``__mp_main__`` (its ``if __name__ == "__main__":`` part skipped) with the shim."""
    path = os.environ[PROGRAM_ENV]
    install()
    argv0, sys.argv[0] = sys.argv[0], path
    try:
        return dict(vars(_exec_program(path, "__mp_main__", _init_globals(warn=False))))
    finally:
        sys.argv[0] = argv0


def main(argv: list[str] | None = None) -> int:
    """``python -m tensorvm.tf_api.tf_shim PROGRAM.py [ARGS...]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stderr.write("usage: python -m tensorvm.tf_api.tf_shim PROGRAM.py [ARGS...]\n")
        return 0 if argv else 2
    try:
        run_program(argv[0], argv[1:])
    except UsageError as e:
        sys.stderr.write(f"tensorvm tf: {e}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
elif __name__ == "__mp_main__" and os.environ.get(PROGRAM_ENV):
    # multiprocessing imports this module as the __mp_main__ of a process the program spawned
    # (the program's __main__ names it in its __spec__): become the program, shim installed
    from tensorvm.tf_api import tf_shim as _shim
    globals().update(_shim._spawned_program_namespace())
