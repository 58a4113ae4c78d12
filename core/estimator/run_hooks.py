"""The session hooks an :class:`~tensorvm.estimator.Estimator` adds to its loops: start a
``Dataset``'s iterator, stop an evaluation after N batches (the metrics are read at the end
by ``tv.train.FinalOpsHook``)."""
from __future__ import annotations

from ..train.hooks import SessionRunHook

__all__ = ["DatasetInitializerHook", "StopAfterNEvalsHook"]


class DatasetInitializerHook(SessionRunHook):
    """Run an initializable iterator's ``initializer`` once the session exists (and again
    after a recovery, which recreates the state)."""

    def __init__(self, iterator):
        self._iterator = iterator

    def after_create_session(self, session, coord):
        session.run(self._iterator.initializer)


class StopAfterNEvalsHook(SessionRunHook):
    """Ask to stop after ``num_evals`` runs of the evaluation loop."""

    def __init__(self, num_evals: int):
        self._num_evals, self._done = int(num_evals), 0

    def after_create_session(self, session, coord):
        self._done = 0

    def after_run(self, run_context, run_values):
        self._done += 1
        if self._done >= self._num_evals:
            run_context.request_stop()
