"""The session hooks an :class:`~tensorvm.estimator.Estimator` adds to its loops: start a
``Dataset``'s iterator, stop an evaluation after N batches, read the metrics at the end."""
from __future__ import annotations

from ..train.hooks import SessionRunHook

__all__ = ["DatasetInitializerHook", "FinalOpsHook", "StopAfterNEvalsHook"]


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


class FinalOpsHook(SessionRunHook):
    """Fetch ``final_ops`` (a dict of tensors) when the session ends: the metrics' values
    after every batch was added (``final_ops_values``)."""

    def __init__(self, final_ops):
        self._final_ops, self.final_ops_values = final_ops, None

    def end(self, session):
        self.final_ops_values = session.run(self._final_ops)
