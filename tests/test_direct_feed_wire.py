"""How a ``tvm_run`` message carries a feed (issue 26: the driver's CPU per training step).

A string feed (a training step's token: a 0-d object array) went through Dask's general
serialisation, ``serialize`` -> pickle, a header and a frame of its own: ~30 us of the
client's CPU per message and ~20 us of the worker's to read it, on every step.
:func:`~tensorvm.runtime.direct.step_calls.pack_feed` sends a small string array as its strings
(``pack``'s ``"O"`` form: no pickle either way) and pickles another small object array once,
into a sub-header that Dask's protocol unpickles on the worker; every other value keeps
``pack``'s form. Either way the worker's ``unpack`` gives back an equal value (dtype, shape,
items).
"""
import numpy as np
import pytest

from tensorvm.runtime.direct.packing import SMALL_BYTES, pack, unpack
from tensorvm.runtime.direct.step_calls import pack_feed


def _trip(value, counter=None):
    """``value`` through a feed's trip: packed on the client, a comm message's frames, the
    worker's unpack."""
    from distributed.protocol import dumps, loads
    frames = dumps({"op": "tvm_run", "feeds": [[0, pack_feed(value)]]})
    return unpack(loads(frames)["feeds"][0][1]), frames


STRINGS = [
    np.asarray(b"a1b2c3d4e5-17/3", dtype=object),  # a coordinator's token
    np.asarray(b"", dtype=object),
    np.asarray("ünï", dtype=object),
    np.asarray(np.bytes_(b"ab"), dtype=object).reshape(()),  # a NumPy bytes item stays one
    np.asarray(None, dtype=object),
    np.array([b"ab\x00", b"\x00", b""], dtype=object),  # trailing NULs stay (no 'S' dtype)
    np.array([[b"x", b"yy"], [b"zzz", b"w"]], dtype=object),
    np.array([[b"x", b"yy"], [b"zzz", b"w"]], dtype=object).T,  # Fortran order
    np.array([b"a", b"b", b"c", b"d"], dtype=object)[::2],  # strided
    np.empty((0, 3), dtype=object),
    np.array(["text", "ünï"], dtype=object),  # str items stay str
    np.array([b"a", None, 3], dtype=object),
]


@pytest.mark.parametrize("value", STRINGS, ids=lambda v: f"{v.shape}")
def test_string_feeds_come_back_equal_with_dtype_and_shape(value):
    got, _ = _trip(value)
    assert type(got) is np.ndarray and got.dtype == object and got.shape == value.shape
    assert [type(x) for x in got.ravel()] == [type(x) for x in value.ravel()]
    assert got.ravel().tolist() == value.ravel().tolist()
    assert got.flags.writeable


@pytest.mark.parametrize("value", [np.arange(6, dtype=np.float32).reshape(2, 3),
                                   np.float64(2.5), np.array(True), np.zeros((0,), np.int8),
                                   np.arange(1 << 15, dtype=np.float64)])
def test_other_feeds_keep_packs_form(value):
    mine, theirs = pack_feed(value), pack(value)
    assert mine[0] == theirs[0] and [type(x) for x in mine] == [type(x) for x in theirs]
    got, _ = _trip(value)
    assert type(got) is type(value) and got.dtype == value.dtype
    assert np.asarray(got).tobytes() == np.asarray(value).tobytes()


def test_a_token_feed_is_not_serialised_by_dask(monkeypatch):
    """The failure this fixes: each step's token went through ``serialize_and_split`` (Dask's
    general serialisation) on the client, and ``merge_and_deserialize`` on the worker."""
    from distributed.protocol import core
    calls = []
    real_ser, real_de = core.serialize_and_split, core.merge_and_deserialize
    monkeypatch.setattr(core, "serialize_and_split",
                        lambda *a, **k: calls.append("serialize") or real_ser(*a, **k))
    monkeypatch.setattr(core, "merge_and_deserialize",
                        lambda *a, **k: calls.append("deserialize") or real_de(*a, **k))
    token = np.asarray(b"0123456789-42/0", dtype=object)
    got, frames = _trip(token)
    assert got.item() == token.item() and calls == []
    assert len(frames) == 1  # the message alone: the token travels as its bytes, no pickle


def test_a_large_string_feed_keeps_frames_of_its_own():
    """A large object array is not copied into a header: Dask's serialisation as before."""
    from distributed.protocol.serialize import Serialize
    big = np.array([b"%099d" % i for i in range(SMALL_BYTES // 50)], dtype=object)
    packed = pack_feed(big)
    assert packed[0] == "o" and isinstance(packed[1], Serialize)
    got, _ = _trip(big)
    assert got.dtype == object and got.tolist() == big.tolist()
