"""A job function's typed parameters as click options (``num_reducers: int = 2`` ->
``--num-reducers INTEGER [default: 2]``).

``str``/``int``/``float`` -> typed options; ``bool`` -> a flag (``--x/--no-x`` when the default
is True); ``Literal[...]`` -> a choice; ``list[T]`` -> a repeatable option; ``X | None`` -> X,
optional; ``Annotated[int, click.IntRange(min=1)]`` -> that click type (so a count of 0 is a
usage error before the job runs). The bundled jobs' numbers get their ranges from
:data:`BUNDLED_RANGES` (their functions stay plain Python). A parameter without a default is
required. Help text comes from the docstring's
``Args:``/``Parameters`` entries (``name: text``). A parameter whose type has no command-line
form (``np.ndarray``) is left out when it has a default.

>>> def f(input: str, num_reducers: int = 2, overwrite: bool = False):
...     '''Count.
...
...     Args:
...         input: text files (a URL or glob).
...     '''
>>> [(o.name, o.opts, o.required) for o in job_options(f)]
[('input', ['--input'], True), ('num_reducers', ['--num-reducers'], False), \
('overwrite', ['--overwrite'], False)]
"""
from __future__ import annotations

import inspect
import re
import types
import typing

import click

_SIMPLE = {str: click.STRING, int: click.INT, float: click.FLOAT}
_NO_DEFAULT = inspect.Parameter.empty

_COUNT = click.IntRange(min=1)
BUNDLED_RANGES: dict[str, click.ParamType] = {
    **{name: _COUNT for name in (
        "num_reducers", "split_size", "map_tasks", "k", "iterations", "num_nodes", "sample",
        "files", "workers", "steps", "steps_per_run", "report_every", "eval_every", "n", "d",
        "rows", "features", "shards", "holdout", "batch_size", "vocab", "users", "dim",
        "ratings")},
    "n_records": click.IntRange(min=0), "seed": click.IntRange(min=0),
    "lr": click.FloatRange(min=0, min_open=True), "lam": click.FloatRange(min=0),
    "tolerance": click.FloatRange(min=0), "damping": click.FloatRange(min=0, max=1),
}
"""The ranges of the bundled jobs' numeric parameters, by name (one name, one meaning across
the bundled jobs): counts and sizes >= 1, seeds >= 0, a learning rate > 0..."""


BUNDLED_HELP: dict[str, str] = {
    "input": "the input: a URL (file://, s3://...), glob or folder of text files (a folder "
             "with _SUCCESS: the files it lists).",
    "output": "the output folder URL: part files, then _SUCCESS listing them (omit it to "
              "print the result; a large one is then cut, so pass it for all of it).",
    "num_reducers": "reduce tasks (count; one part file each; default: sized to the input, "
                    "each reducer's share within a quarter of the memory a worker thread can "
                    "use).",
    "split_size": "bytes per input split (a map task reads whole splits).",
    "overwrite": "replace an output folder that exists.",
    "map_tasks": "map tasks (count; default: one per worker device).",
    "pattern": "an RE2 regular expression, matched anywhere in a line.",
    "sample": "keys sampled to choose the reducers' key ranges (count).",
}
"""Help of the bundled jobs' common parameters, by name, where the docstring gives none."""

_JOB_HELP: dict[tuple[str, str], str] = {
    ("index", "input"): "the documents: a URL, glob or folder of JSON-lines files "
                        '({"id": int, "text": str} per line).',
    ("join", "left"): "the left CSV file(s) (with a header): a URL, glob or folder.",
    ("join", "right"): "the right CSV file(s) (with a header): a URL, glob or folder.",
    ("join", "key"): "the integer column both files are joined on.",
    ("join", "left_value"): "the left file's column to output.",
    ("join", "right_value"): "the right file's column to output.",
}


def bundled_help(job: str, name: str) -> str:
    """The help of bundled job ``job``'s parameter ``name`` where its docstring has none."""
    return _JOB_HELP.get((job, name)) or BUNDLED_HELP.get(name, "")


def plain(text: str) -> str:
    """Help text without RST markup (````x```` -> ``x``; ``:func:`x``` -> ``x``).

    >>> plain("the ``input`` of :func:`tensorvm.storage.splits`")
    'the input of tensorvm.storage.splits'
    """
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")


class UnsupportedParameter(TypeError):
    """A required parameter whose type the command line cannot express."""


def _unwrap_optional(tp):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def param_help(fn) -> dict[str, str]:
    """``{name: help}`` from Google-style ``Args:`` or NumPy-style ``Parameters`` sections."""
    doc = inspect.getdoc(fn) or ""
    out: dict[str, str] = {}
    section = False
    current = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in _SECTIONS:
            section = True
            continue
        if not section or set(stripped) <= {"-"} and stripped:
            continue
        if not stripped:
            current = None
            continue
        m = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
        if m and not line.startswith(" " * 8):
            current = m.group(1)
            out[current] = m.group(2)
        elif current:
            out[current] = (out[current] + " " + stripped).strip()
    return out


_SECTIONS = ("Args:", "Arguments:", "Parameters", "Parameters:")


def job_help(fn) -> str:
    """``fn``'s docstring without its parameter section (each entry is already the help of
    its option), for a command's ``--help`` text.

    >>> def f(n: int = 1):
    ...     '''Count to n.
    ...
    ...     Args:
    ...         n: how far.
    ...     '''
    >>> job_help(f)
    'Count to n.'
    """
    doc = inspect.getdoc(fn) or ""
    kept = []
    for line in doc.splitlines():
        if line.strip() in _SECTIONS:
            break
        kept.append(line)
    return plain("\n".join(kept).strip())


def job_options(fn, skip=("session", "cluster"),
                ranges: dict[str, click.ParamType] | None = None,
                helps: dict[str, str] | None = None) -> list[click.Option]:
    """Click options for ``fn``'s parameters (in order, ``skip`` left out). ``ranges``:
    click types (``click.IntRange``...) for numeric parameters by name, where the annotation
    gives none (``Annotated[int, click.IntRange(min=1)]`` does).

    >>> def f(num_reducers: int = 2, seed: int = 0):
    ...     pass
    >>> [str(o.type) for o in job_options(f, ranges=BUNDLED_RANGES)]
    ['<IntRange x>=1>', '<IntRange x>=0>']
    """
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to defaults
        hints = {}
    helps = {**(helps or {}), **{k: v for k, v in param_help(fn).items() if v}}
    opts = []
    for p in inspect.signature(fn).parameters.values():
        if p.name in skip or p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        opt = _option(p, hints.get(p.name), plain(helps.get(p.name, "")),
                      (ranges or {}).get(p.name))
        if opt is not None:
            opts.append(opt)
    return opts


def _click_type(hint) -> tuple[object, click.ParamType | None]:
    """``Annotated[T, ..., click_type, ...]`` -> ``(T, click_type)``; else ``(hint, None)``."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *extra = typing.get_args(hint)
        return base, next((x for x in extra if isinstance(x, click.ParamType)), None)
    return hint, None


def _option(p: inspect.Parameter, hint, help_text: str,
            number_type: click.ParamType | None = None) -> click.Option | None:
    flag = "--" + p.name.replace("_", "-")
    required = p.default is _NO_DEFAULT
    default = None if required else p.default
    tp, _ = _unwrap_optional(hint) if hint is not None else (None, False)
    tp, annotated = _click_type(tp)
    tp, _ = _unwrap_optional(tp) if tp is not None else (None, False)
    if tp is None and default is not None:
        tp = type(default)
    if annotated is None and tp in (int, float) and number_type is not None and \
            isinstance(number_type, click.IntRange) == (tp is int):
        annotated = number_type
    if tp is bool:
        decl = [f"{flag}/--no-{flag[2:]}"] if default else [flag]
        return click.Option(decl + [p.name], is_flag=True, default=bool(default), help=help_text,
                            show_default=bool(default))
    origin = typing.get_origin(tp)
    multiple = False
    if origin is typing.Literal:
        ctype = click.Choice([str(a) for a in typing.get_args(tp)])
    elif origin in (list, tuple, typing.Sequence) or tp in (list, tuple):
        args = typing.get_args(tp)
        ctype, multiple = _SIMPLE.get(args[0] if args else str, click.STRING), True
        default = tuple(default) if default else ()
    elif annotated is not None:
        ctype = annotated
    elif tp in _SIMPLE or tp is None:
        ctype = _SIMPLE.get(tp, click.STRING)
    else:
        if not required:
            return None  # no command-line form; the function's default applies
        raise UnsupportedParameter(
            f"parameter {p.name!r} has type {getattr(tp, '__name__', tp)!s}, which has no "
            "command-line form (use str, int, float, bool, Literal or list)")
    extra = {} if required else {"default": default}  # click 8.5: default=None is a value
    return click.Option([flag, p.name], type=ctype, required=required, multiple=multiple,
                        help=help_text, show_default=not required and default not in (None, ()),
                        **extra)
