"""``ClosureQueue.wait_any(values, at_least=n)``: an async ``run_replicas`` tops its closures up
in batches (issue 26: the driver's thread was woken once per finished closure, each wake a
few tens of microseconds of a 2-core machine's CPU per step). The waiter returns once ``n`` of
its values have ended — not after the first — or at once on an error or a close, and a
timeout still returns those that ended."""
import threading

from tensorvm.framework.errors import InvalidArgumentError
from tensorvm.train.remote_value import Closure, ClosureQueue


def _queue(n):
    q = ClosureQueue()
    values = [q.put(Closure(lambda w: None, (), {}, b"t-%d" % i)) for i in range(n)]
    return q, values, [q.get(timeout=0) for _ in range(n)]


def _waiter(q, values, **kw):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("ended", q.wait_any(values, **kw)))
    t.start()
    return t, out


def test_a_waiter_for_two_is_not_done_after_one_and_is_after_two():
    q, values, taken = _queue(4)
    t, out = _waiter(q, values, at_least=2)
    q.finished(taken[0], 1)
    t.join(0.2)  # (a lower bound only: it must still be waiting, however slow the machine)
    assert t.is_alive() and "ended" not in out
    q.finished(taken[1], 2)
    t.join()
    assert out["ended"] == values[:2]
    assert [v.fetch() for v in out["ended"]] == [1, 2]


def test_at_least_is_capped_at_the_values_given_and_a_timeout_returns_what_ended():
    q, values, taken = _queue(2)
    q.finished(taken[0], "a")
    assert q.wait_any(values, timeout=0.01, at_least=5) == values[:1]
    q.finished(taken[1], "b")
    assert q.wait_any(values, at_least=5) == values  # all of them: no wait


def test_an_error_wakes_a_batch_waiter_at_once():
    q, values, taken = _queue(3)
    t, out = _waiter(q, values, at_least=3)
    q.failed(taken[0], InvalidArgumentError("bad batch"))
    t.join()
    assert out["ended"] == values[:1]


def test_a_close_wakes_a_batch_waiter():
    q, values, taken = _queue(3)
    t, out = _waiter(q, values, at_least=3)
    q.finished(taken[0], 0)
    q.close("the run ended")
    t.join()
    assert out["ended"] == values[:1]


def test_closures_of_other_callers_do_not_make_a_waiter_return_early():
    q, values, taken = _queue(2)
    other = q.put(Closure(lambda w: None, (), {}, b"x"))
    c = q.get(timeout=0)
    t, out = _waiter(q, values, at_least=2)
    q.finished(c, "other")  # wakes the waiter (its count of ends is reached), which waits on
    q.finished(taken[0], 0)
    t.join(0.2)
    assert t.is_alive() and other.done()
    q.finished(taken[1], 1)
    t.join()
    assert out["ended"] == values
