"""``tv.logging``: TF 1.x's ``tf.logging`` (``set_verbosity``, ``info``, ``warn`` …) over
Python's ``logging``, on the logger named ``tensorflow`` as in TF, so that a TF 1.x
program's log calls and log configuration work unchanged. (The library itself logs on the
``tensorvm`` logger.)

>>> import tensorvm as tv
>>> tv.logging.set_verbosity(tv.logging.WARN); tv.logging.get_verbosity() == tv.logging.WARN
True
"""
from __future__ import annotations

import logging as _logging

__all__ = [
    "DEBUG",
    "ERROR",
    "FATAL",
    "INFO",
    "WARN",
    "debug",
    "error",
    "fatal",
    "get_verbosity",
    "info",
    "log",
    "log_every_n",
    "log_first_n",
    "log_if",
    "set_verbosity",
    "vlog",
    "warn",
    "warning",
]

DEBUG, INFO, WARN, ERROR, FATAL = (_logging.DEBUG, _logging.INFO, _logging.WARNING,
                                   _logging.ERROR, _logging.FATAL)
_logger = _logging.getLogger("tensorflow")
_counts: dict = {}


def set_verbosity(v) -> None:
    """Log messages of level ``v`` and above."""
    _logger.setLevel(v)


def get_verbosity() -> int:
    return _logger.getEffectiveLevel()


def log(level, msg, *args, **kwargs) -> None:
    _logger.log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs) -> None:
    _logger.debug(msg, *args, **kwargs)


def info(msg, *args, **kwargs) -> None:
    _logger.info(msg, *args, **kwargs)


def warning(msg, *args, **kwargs) -> None:
    _logger.warning(msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs) -> None:
    _logger.error(msg, *args, **kwargs)


def fatal(msg, *args, **kwargs) -> None:
    _logger.critical(msg, *args, **kwargs)


def vlog(level, msg, *args, **kwargs) -> None:
    _logger.log(level, msg, *args, **kwargs)


def log_if(level, msg, condition, *args) -> None:
    if condition:
        _logger.log(level, msg, *args)


def _site():
    import sys
    f = sys._getframe(2)
    return f.f_code.co_filename, f.f_lineno


def log_every_n(level, msg, n, *args) -> None:
    """Log on the 1st, (n+1)th, (2n+1)th … call from this line."""
    k = _counts.get(_site(), 0)
    _counts[_site()] = k + 1
    log_if(level, msg, k % n == 0, *args)


def log_first_n(level, msg, n, *args) -> None:
    """Log on the first ``n`` calls from this line."""
    k = _counts.get(_site(), 0)
    _counts[_site()] = k + 1
    log_if(level, msg, k < n, *args)
