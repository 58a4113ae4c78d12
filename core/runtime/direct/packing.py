"""How a value travels in a direct-plane message (:func:`pack`, :func:`unpack`): a small NumPy
array (or scalar) as its raw bytes inside the message's msgpack header (Dask's general
serialisation costs ~10x more per small value), small strings as themselves, anything else
through Dask's serialisation, a large array as its own out-of-band frame (a
:class:`~tensorvm.vm.results.StageResult` of one value, whose wire form gives it a buffer of
its own).

Its own module because both ends use it: the client packs a step's feeds and unpacks its
fetches (:mod:`tensorvm.runtime.direct.client`), a worker packs the values it pushes to its
peers and unpacks those it receives (:mod:`tensorvm.runtime.direct.data_plane`,
:mod:`tensorvm.runtime.direct.peer_links`) — and a client never needs the worker side.

>>> import numpy as np
>>> packed = pack(np.arange(3, dtype=np.int32))
>>> packed[0], packed[1], packed[2]
('a', '<i4', (3,))
>>> unpack(packed)
array([0, 1, 2], dtype=int32)
"""
from __future__ import annotations

import numpy as np

from ...vm.results import StageResult

SMALL_BYTES = 1 << 16  # arrays up to this size travel inside a message's header
_PLAIN = frozenset("biufc")  # dtype kinds sent as raw bytes
SMALL_STRINGS = 1 << 10  # string arrays of up to this many bytes objects travel as their bytes


def pack(value):
    """``value`` (an array, a scalar, a tuple of them, anything Dask serialises) as data for a
    data-plane message: small numeric arrays and NumPy scalars as ``(tag, dtype, shape,
    bytes)``, small string arrays (a step token) and strings as themselves, a tuple item by
    item, a large array behind an alignment guard as one out-of-band
    frame (received into a buffer of its own, without a copy), anything else through Dask's
    serialisation. :func:`unpack` gives back an equal value, bit for bit, with the same dtype,
    shape and memory order (arrays writeable)."""
    t = type(value)
    if t is np.ndarray:
        dt = value.dtype
        if dt.kind == "O" and value.size <= SMALL_STRINGS and value.flags.c_contiguous:
            # a string tensor (a step token: a 0-d array of bytes) as its bytes, where Dask's
            # serialisation would pickle it, a pickle each way every step
            items = value.ravel().tolist()
            if all(map(_text, items)) and sum(map(len, items)) <= SMALL_BYTES:
                return ("O", value.shape, items)
        if value.nbytes <= SMALL_BYTES and dt.kind in _PLAIN:
            if value.flags.c_contiguous:
                return ("a", dt.str, value.shape, value.tobytes())
            if value.flags.f_contiguous:
                return ("f", dt.str, value.shape, value.tobytes(order="F"))
        elif value.nbytes > SMALL_BYTES:
            # Serialised here, not by the comm: its frames go as they are, where the comm would
            # cut a large one into 64 MiB shards that the receiver then copies back together.
            from distributed.protocol.serialize import Serialized, serialize
            return ("b", Serialized(*serialize(StageResult((value,)))))
    elif t is tuple:
        return ("t", [pack(v) for v in value])
    elif t is StageResult:
        return ("r", [pack(v) for v in value])
    elif isinstance(value, np.generic) and value.dtype.kind in _PLAIN:
        return ("s", value.dtype.str, value.tobytes())
    elif (t is bytes or t is str) and len(value) <= SMALL_BYTES and _text(value):
        return ("y", value)
    from distributed.protocol import to_serialize
    return ("o", to_serialize(value))


def _text(v) -> bool:
    """Whether ``v`` travels as itself in a msgpack message: bytes, or a str UTF-8 can encode
    (msgpack keeps the two apart; a lone surrogate would fail the message)."""
    t = type(v)
    if t is bytes:
        return True
    if t is not str:
        return False
    if v.isascii():
        return True
    try:
        v.encode()
    except UnicodeEncodeError:
        return False
    return True


def unpack(data):
    """The value :func:`pack` made ``data`` of (after the message's trip)."""
    tag = data[0]
    if tag == "a":
        return np.frombuffer(data[3], data[1]).reshape(data[2]).copy()
    if tag == "r":
        return StageResult([unpack(v) for v in data[1]])
    if tag == "s":
        return np.frombuffer(data[2], data[1])[0]
    if tag == "t":
        return tuple(unpack(v) for v in data[1])
    if tag == "O":
        out = np.empty(len(data[2]), object)
        out[:] = data[2]
        return out.reshape(data[1])
    if tag == "y":
        return data[1]
    if tag == "f":
        return np.frombuffer(data[3], data[1]).reshape(data[2], order="F").copy(order="K")
    if tag == "b":
        return data[1][0]
    return data[1]


def value_nbytes(value) -> int:
    """The bytes of ``value``'s arrays (a tuple's, item by item); 0 for what has none.
    Counted a value each push and stage: arrays, the common case, first."""
    t = type(value)
    if t is np.ndarray:
        return value.nbytes
    if t is StageResult or isinstance(value, tuple):
        n = 0
        for v in value:
            n += v.nbytes if type(v) is np.ndarray else value_nbytes(v)
        return n
    return int(getattr(value, "nbytes", 0) or 0)


# Dask's TCP comm cuts a frame over ``distributed.comm.shard`` (64 MiB) into shards, and the
# receiver copies a sharded array back together — unless it was the message's first buffer,
# which lands unaligned with the header instead. A tensorvm worker sends every tensor behind
# ALIGN_GUARD (the Dask plane's results, the direct plane's large values): unsplit, it arrives
# in an aligned buffer of its own, with no copy (256 MiB Send/Recv on the Dask plane: ~0.4x ->
# ~1x of plain Dask). TLS comms keep their own limit (2 GiB at most, OpenSSL's).
UNSPLIT_BYTES = 1 << 30
