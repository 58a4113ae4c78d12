"""Secrets kept out of the job registry: the values of a job's arguments whose option or key
name says they are secret (``--api-token X``, ``db_password``) are replaced by
:data:`REDACTED` (:func:`redact_args`) before the registry keeps them, so neither the
dashboard page, its JSON API nor a job's event log ever shows them.

Its own module: a rule about text, with no state, that the registry applies to every job it
starts (:class:`~tensorvm.scheduler_ext.job_record.JobRecord`) and the history to every job
message it writes to a job's event log (:mod:`tensorvm.scheduler_ext.history`).
"""
from __future__ import annotations

import re

REDACTED = "***"
"""What the registry keeps, and the pages show, of an argument whose name says it is a
secret (:func:`redact_args`)."""
_SECRET_WORDS = ("token", "secret", "password", "passwd", "credential")
_OPTION_IN_TEXT = re.compile(
    r"(?P<opt>--?[A-Za-z][\w.-]*)(?:(?P<eq>=)(?P<v1>\S*)|(?P<sp>\s+)(?P<v2>(?!-)\S+))")


def secret_name(name) -> bool:
    """Whether an option or key name says its value is a secret: a part of it (split at
    anything but letters and digits) says token, secret, password or credential, is ``pwd``
    or ends in ``key`` (``--api-token``, ``db_password``, ``AWS_SECRET_ACCESS_KEY``,
    ``apikey``).

    >>> [secret_name(n) for n in ("--api-token", "aws_secret_access_key", "APIKEY", "input")]
    [True, True, True, False]
    """
    parts = [p for p in re.split(r"[^a-z0-9]+", str(name).lower()) if p]
    return any(w in p for p in parts for w in _SECRET_WORDS) or \
        any(p == "pwd" or p.endswith(("key", "keys")) for p in parts)


def redact_args(args, _depth: int = 0):
    """``args`` (a job's arguments: a dict, argv-like lists, command-line strings) with the
    values of secret-named options (:func:`secret_name`) replaced by :data:`REDACTED`: a
    dict's values under such keys, ``--api-token X`` and ``--api-token=X`` in a list or in a
    string. Everything else is kept as it is.

    >>> redact_args({"api_key": "k1", "argv": ["--db-password", "p1", "--token=t1", "-n", "3"],
    ...              "cmd": "--client-secret s1 --lr 0.1", "input": "in.txt"})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'api_key': '***', 'argv': ['--db-password', '***', '--token=***', '-n', '3'],
     'cmd': '--client-secret *** --lr 0.1', 'input': 'in.txt'}
    """
    if _depth > 16:
        return REDACTED  # nothing real nests this deep: shown as nothing
    if isinstance(args, dict):
        return {k: REDACTED if secret_name(k) else redact_args(v, _depth + 1)
                for k, v in args.items()}
    if isinstance(args, (list, tuple)):
        out, hide = [], False
        for item in args:
            if hide and not (isinstance(item, str) and item.startswith("--")):
                out.append(REDACTED)  # the value after a secret-named option
                hide = False
                continue
            hide = isinstance(item, str) and item.startswith("-") and "=" not in item \
                and secret_name(item)
            out.append(redact_args(item, _depth + 1))
        return out
    if isinstance(args, str) and "-" in args:
        return _OPTION_IN_TEXT.sub(_redact_option, args)
    return args


def _redact_option(m) -> str:
    if not secret_name(m["opt"]):
        return m[0]
    return f"{m['opt']}={REDACTED}" if m["eq"] else f"{m['opt']}{m['sp']}{REDACTED}"
