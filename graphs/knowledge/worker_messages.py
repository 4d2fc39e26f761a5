"""The messages between :mod:`graphs.knowledge.convert` and its conversion process
(:mod:`graphs.knowledge.convert_worker`): an 8-byte big-endian length, then a pickle. Only a
parent and the worker it started exchange them."""

from __future__ import annotations

import pickle
import struct
from typing import Any, BinaryIO


def read_message(stream: BinaryIO) -> Any:
    """One message from ``stream``; raises EOFError when it ends."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (size,) = struct.unpack(">Q", head)
    body = stream.read(size)
    if len(body) < size:
        raise EOFError
    return pickle.loads(body)  # noqa: S301 - only a parent and the worker it started write these


def write_message(stream: BinaryIO, message: Any) -> None:
    """Write ``message`` (any picklable value) to ``stream`` as one message and flush it."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack(">Q", len(body)) + body)
    stream.flush()
