"""Reading an ONNX file's weights straight into numpy arrays.

Parsed whole, a model's weights are copied three times: the file into a bytes object,
the bytes into protobuf's arena, and each ``raw_data`` out again into its own bytes
object for ``numpy_helper.to_array``. For a 69 MB MiniLM those copies and the parse were
two thirds of the load. This reader walks the protobuf wire format of the file itself
(ModelProto field 7 is the graph, GraphProto field 5 its initializers, TensorProto
field 9 a tensor's ``raw_data``), reads each top-level initializer's ``raw_data`` with
``readinto`` into an array of its own, and hands protobuf the rest of the bytes, which
parse into the same model with those fields left out.

Anything it does not expect (a group, a truncated field, a second graph field) gives
None, and the caller parses the file the ordinary way, which reports what is wrong.
"""

from __future__ import annotations

import io

import numpy as np

_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW = 7, 5, 9
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class _Odd(Exception):
    """The bytes are not what this reader handles: parse them the ordinary way."""


class _Reader:
    """The file through a window of bytes; a ``raw_data`` goes past the window into its array."""

    CHUNK = 1 << 20

    def __init__(self, f: io.BufferedIOBase, size: int) -> None:
        self.f, self.size = f, size
        self.buf, self.i, self.base = b"", 0, 0   # the window, the place in it, its file offset

    @property
    def pos(self) -> int:
        return self.base + self.i

    def _fill(self, n: int) -> None:
        """At least ``n`` bytes in the window from the place on."""
        have = len(self.buf) - self.i
        if have >= n:
            return
        if n < 0 or self.pos + n > self.size:
            raise _Odd
        more = self.f.read(max(self.CHUNK, n - have))
        self.buf, self.base, self.i = self.buf[self.i:] + more, self.pos, 0
        if len(self.buf) < n:
            raise _Odd

    def take(self, n: int) -> bytes:
        self._fill(n)
        out = self.buf[self.i:self.i + n]
        self.i += n
        return out

    def into(self, n: int) -> np.ndarray:
        """The next ``n`` bytes in an array of their own (read straight into it past the window)."""
        if n < 0 or self.pos + n > self.size:
            raise _Odd
        out = np.empty(n, np.uint8)
        have = min(n, len(self.buf) - self.i)
        out[:have] = np.frombuffer(self.buf, np.uint8, have, self.i)
        self.i += have
        if n > have:
            if self.f.readinto(out[have:].data) != n - have:
                raise _Odd
            self.buf, self.base, self.i = b"", self.base + len(self.buf) + n - have, 0
        return out

    def skip(self, n: int) -> None:
        """Past the next ``n`` bytes without reading them (a seek beyond the window)."""
        if n < 0 or self.pos + n > self.size:
            raise _Odd
        if n <= len(self.buf) - self.i:
            self.i += n
            return
        end = self.pos + n
        self.f.seek(end)
        self.buf, self.base, self.i = b"", end, 0

    def varint(self) -> tuple[int, bytes]:
        """(value, its bytes as written)."""
        self._fill(min(10, self.size - self.pos) or 1)
        buf, start = self.buf, self.i
        out, shift, i = 0, 0, start
        while i < len(buf):
            b = buf[i]
            i += 1
            out |= (b & 0x7F) << shift
            if b < 0x80:
                self.i = i
                return out, buf[start:i]
            shift += 7
            if shift > 63:
                break
        raise _Odd

    def field(self) -> tuple[int, int, bytes]:
        """(field number, wire type, the tag's bytes)."""
        tag, raw = self.varint()
        return tag >> 3, tag & 7, raw

    def rest_of(self, wire: int) -> bytes:
        """The bytes of a field's value after its tag (a length-delimited one's length included)."""
        if wire == _VARINT:
            return self.varint()[1]
        if wire == _I64:
            return self.take(8)
        if wire == _I32:
            return self.take(4)
        if wire == _LEN:
            n, raw = self.varint()
            return raw + self.take(n)
        raise _Odd   # groups (3, 4) and the reserved types


def _skip_value(r: _Reader, wire: int) -> None:
    if wire == _VARINT:
        r.varint()
    elif wire in (_I64, _I32):
        r.skip(8 if wire == _I64 else 4)
    elif wire == _LEN:
        r.skip(r.varint()[0])
    else:
        raise _Odd


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len_field(tag: bytes, body: bytes) -> bytes:
    return tag + _varint(len(body)) + body


def _tensor(r: _Reader, end: int) -> tuple[bytes, np.ndarray | None]:
    """One TensorProto up to ``end``: its bytes without ``raw_data``, and that (the last one)."""
    parts, raw = [], None
    while r.pos < end:
        num, wire, tag = r.field()
        if num == _TENSOR_RAW and wire == _LEN:
            raw = r.into(r.varint()[0])
        else:
            parts.append(tag + r.rest_of(wire))
    if r.pos != end:
        raise _Odd
    return b"".join(parts), raw


def _graph(r: _Reader, end: int, raws: dict[int, np.ndarray]) -> bytes:
    parts, index = [], 0
    while r.pos < end:
        num, wire, tag = r.field()
        if num == _GRAPH_INITIALIZER and wire == _LEN:
            n = r.varint()[0]
            body, raw = _tensor(r, r.pos + n)
            if raw is not None:
                raws[index] = raw
            index += 1
            parts.append(_len_field(tag, body))
        else:
            parts.append(tag + r.rest_of(wire))
    if r.pos != end:
        raise _Odd
    return b"".join(parts)


def raw_bytes(f: io.BufferedIOBase, size: int) -> int | None:
    """How many bytes the top-level initializers' ``raw_data`` hold, found by reading only
    the fields around them; None if the bytes are not plain. Weights stored otherwise
    (Constant nodes, typed fields) make splitting cost more than it saves."""
    try:
        return _sized(_Reader(f, size), size, (_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW))
    except _Odd:
        return None


def _sized(r: _Reader, end: int, path: tuple[int, ...]) -> int:
    """The bytes of the fields at ``path`` (field numbers, outermost first) in the message
    that ends at ``end``; everything else is skipped unread."""
    total = 0
    while r.pos < end:
        num, wire, _ = r.field()
        if num != path[0] or wire != _LEN:
            _skip_value(r, wire)
            continue
        n = r.varint()[0]
        if len(path) == 1:
            total += n
            r.skip(n)
        else:
            total += _sized(r, r.pos + n, path[1:])
    if r.pos != end:
        raise _Odd
    return total


def split_weights(f: io.BufferedIOBase, size: int) -> tuple[bytes, dict[int, np.ndarray]] | None:
    """The model's bytes without its top-level initializers' ``raw_data``, and those by
    initializer index, each in its own uint8 array; None if the bytes are not plain."""
    r, parts, graphs = _Reader(f, size), [], 0
    raws: dict[int, np.ndarray] = {}
    try:
        while r.pos < size:
            num, wire, tag = r.field()
            if num == _MODEL_GRAPH and wire == _LEN:
                graphs += 1
                if graphs > 1:   # a second graph field merges into the first: leave that to protobuf
                    return None
                n = r.varint()[0]
                parts.append(_len_field(tag, _graph(r, r.pos + n, raws)))
            else:
                parts.append(tag + r.rest_of(wire))
    except _Odd:
        return None
    return b"".join(parts), raws
