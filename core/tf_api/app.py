"""``tv.app`` and ``tv.flags``: TF 1.x's ``tf.app.run`` and ``tf.app.flags`` on absl-py (the
library TF 1.x's own flags wrap).

``FLAGS`` parses ``sys.argv`` the first time a flag is read (unknown flags are left alone), as
TF 1.x's wrapper does, so a module may read ``FLAGS.x`` without ``app.run``. ``app.run(main)``
parses ``argv`` (default ``sys.argv``) and exits with ``main(argv)``'s return value, ``argv``
being the program name followed by the arguments that are not flags.

>>> import tensorvm as tv
>>> tv.app.flags.DEFINE_integer("doctest_app_steps", 3, "steps")
>>> tv.app.flags.FLAGS(["prog", "--doctest_app_steps=7"]) and tv.app.flags.FLAGS.doctest_app_steps
7
"""
from __future__ import annotations

import sys
import types
from collections.abc import Callable

from absl import flags as _absl_flags

__all__ = ["run", "flags"]


class _FlagValuesWrapper:
    """``absl.flags.FLAGS`` that parses ``sys.argv`` (known flags only) on first read."""

    def __init__(self, flag_values):
        self.__dict__["_fv"] = flag_values

    def _ensure_parsed(self):
        fv = self.__dict__["_fv"]
        if not fv.is_parsed():
            fv(sys.argv[:1] + [a for a in sys.argv[1:]], known_only=True)
        return fv

    def __getattr__(self, name):
        fv = self.__dict__["_fv"]
        if name.startswith("__"):
            return getattr(fv, name)
        if name in fv:
            return getattr(self._ensure_parsed(), name)
        return getattr(fv, name)  # absl's methods, and its error for an unknown flag

    def __setattr__(self, name, value):
        setattr(self.__dict__["_fv"], name, value)

    def __delattr__(self, name):
        delattr(self.__dict__["_fv"], name)

    def __contains__(self, name):
        return name in self.__dict__["_fv"]

    def __iter__(self):
        return iter(self.__dict__["_fv"])

    def _parse_flags(self, args=None):
        """TF <= 1.4's way to parse ``sys.argv`` (or ``args``) by hand; returns the rest."""
        return self.__dict__["_fv"](list(sys.argv if args is None else args), known_only=True)

    def __call__(self, argv, known_only: bool = False):
        return self.__dict__["_fv"](argv, known_only=known_only)

    def __repr__(self):
        return f"<tv.app.flags.FLAGS {len(list(self.__dict__['_fv']))} flags>"


FLAGS = _FlagValuesWrapper(_absl_flags.FLAGS)


def _define(kind: str) -> Callable:
    absl_fn = getattr(_absl_flags, kind)

    def define(name, default, help=None, flag_values=None, **kwargs):  # noqa: A002
        fv = flag_values if flag_values is not None else _absl_flags.FLAGS
        if isinstance(fv, _FlagValuesWrapper):
            fv = fv.__dict__["_fv"]
        absl_fn(name, default, help or "", flag_values=fv, **kwargs)

    define.__name__ = kind
    define.__doc__ = f"TF 1.x's ``tf.app.flags.{kind}`` (absl's ``{kind}``); returns None."
    return define


flags = types.ModuleType("tensorvm.tf_api.app.flags",
                         "TF 1.x's tf.app.flags: DEFINE_* and FLAGS (absl-py underneath).")
for _kind in ("DEFINE_string", "DEFINE_integer", "DEFINE_float", "DEFINE_boolean",
              "DEFINE_bool", "DEFINE_list", "DEFINE_enum", "DEFINE_multi_string",
              "DEFINE_multi_integer", "DEFINE_spaceseplist"):
    setattr(flags, _kind, _define(_kind))
flags.FLAGS = FLAGS
flags.Flag = _absl_flags.Flag
flags.FlagValues = _absl_flags.FlagValues
flags.mark_flag_as_required = _absl_flags.mark_flag_as_required
flags.mark_flags_as_required = _absl_flags.mark_flags_as_required
flags.Error = _absl_flags.Error
flags.UnrecognizedFlagError = _absl_flags.UnrecognizedFlagError
flags.IllegalFlagValueError = _absl_flags.IllegalFlagValueError


def run(main: Callable | None = None, argv: list[str] | None = None):
    """Parse the flags in ``argv`` (default ``sys.argv``), then ``sys.exit(main(rest))`` where
    ``rest`` is the program name and the arguments that are not known flags; ``main``
    defaults to ``__main__.main``."""
    args = list(sys.argv if argv is None else argv)
    try:
        rest = _absl_flags.FLAGS(args, known_only=True)
    except _absl_flags.Error as e:
        raise SystemExit(f"FATAL Flags parsing error: {e}") from None
    main = main or sys.modules["__main__"].main
    sys.exit(main(rest))
for _name in dir(_absl_flags):  # the rest of absl.flags (validators, parsers …), as TF re-exports
    if not _name.startswith("_") and not hasattr(flags, _name):
        setattr(flags, _name, getattr(_absl_flags, _name))
