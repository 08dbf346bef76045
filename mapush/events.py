"""Read scalar series out of TensorBoard event files without TensorBoard.

The smoke test checks the memory the trainers logged and ``mapush report`` draws the
curves; importing TensorBoard (and its TensorFlow shims) for that would be slow and one more
thing to break. An event file is a
sequence of TFRecords, each an ``Event`` protobuf; we decode the few fields scalars use:
``Event.step`` (2), ``Event.summary`` (5) -> ``Summary.value`` (1) -> ``tag`` (1) and
``simple_value`` (2) or a one-element float/double ``tensor`` (8).
"""
import struct
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

Scalars = Dict[str, List[Tuple[int, float]]]


def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[Tuple[int, int, object]]:
    """(field number, wire type, value) of a protobuf message; value is int or bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)  # type: object, int
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("unsupported protobuf wire type %d" % wire)
        yield number, wire, value


def _tensor_value(buf: bytes) -> List[float]:
    dtype = 0
    values = []  # type: List[float]
    content = b""
    for number, wire, value in _fields(buf):
        if number == 1 and wire == 0:
            dtype = int(value)  # type: ignore[arg-type]
        elif number == 4 and wire == 2:
            content = value  # type: ignore[assignment]
        elif number == 5 and wire in (2, 5):  # float_val, packed or one fixed32
            raw = bytes(value)  # type: ignore[call-overload]
            values.extend(struct.unpack("<%df" % (len(raw) // 4), raw))
        elif number == 6 and wire in (1, 2):  # double_val, packed or one fixed64
            raw = bytes(value)  # type: ignore[call-overload]
            values.extend(struct.unpack("<%dd" % (len(raw) // 8), raw))
    if not values and content:
        if dtype == 1 and len(content) == 4:  # DT_FLOAT
            values.append(struct.unpack("<f", content)[0])
        elif dtype == 2 and len(content) == 8:  # DT_DOUBLE
            values.append(struct.unpack("<d", content)[0])
    return values


def _scalars_of_event(buf: bytes) -> Iterator[Tuple[str, int, float]]:
    step = 0
    summaries = []
    for number, wire, value in _fields(buf):
        if number == 2 and wire == 0:
            step = int(value)  # type: ignore[arg-type]
            if step >= 1 << 63:
                step -= 1 << 64
        elif number == 5 and wire == 2:
            summaries.append(value)
    for summary in summaries:
        for number, wire, value in _fields(summary):  # type: ignore[arg-type]
            if number != 1 or wire != 2:
                continue
            tag, scalar = None, None
            for vnum, vwire, vval in _fields(value):  # type: ignore[arg-type]
                if vnum == 1 and vwire == 2:
                    tag = bytes(vval).decode("utf-8", "replace")  # type: ignore[arg-type]
                elif vnum == 2 and vwire == 5:
                    scalar = struct.unpack("<f", vval)[0]  # type: ignore[arg-type]
                elif vnum == 8 and vwire == 2:
                    found = _tensor_value(vval)  # type: ignore[arg-type]
                    if len(found) == 1:
                        scalar = found[0]
            if tag is not None and scalar is not None:
                yield tag, step, float(scalar)


def records(path: Path) -> Iterator[bytes]:
    """The TFRecord payloads of one file; a torn last record (a live writer) is ignored."""
    data = Path(path).read_bytes()
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        start = pos + 12
        if start + length + 4 > len(data):
            return
        yield data[start:start + length]
        pos = start + length + 4


def event_files(logdir: Path) -> List[Path]:
    return sorted(p for p in Path(logdir).rglob("*") if "tfevents" in p.name and p.is_file())


def read_scalars(logdir: Path) -> Scalars:
    """``{tag: [(step, value), ...]}`` over every event file under ``logdir``, by step."""
    found = {}  # type: Scalars
    for path in event_files(logdir):
        for payload in records(path):
            try:
                for tag, step, value in _scalars_of_event(payload):
                    found.setdefault(tag, []).append((step, value))
            except (IndexError, ValueError, struct.error):
                continue
    for series in found.values():
        series.sort(key=lambda item: item[0])
    return found
