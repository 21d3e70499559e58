"""Record fields written by hand, independent of the broker's own writer (the tests that
build odd records with them must not share the code they test)."""

from __future__ import annotations


def zigzag_varint(value: int) -> bytes:
    """A signed varint as Kafka's record fields carry it (zigzag, then 7 bits a byte)."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)
