"""MariaDB binlog compression (``log_bin_compress=ON``): the zlib envelope of compressed events.

MariaDB compresses the query text of ``QUERY_COMPRESSED_EVENT`` and the row data of
``*_ROWS_COMPRESSED_EVENT_V1`` events (both when longer than ``log_bin_compress_min_len``) into
one envelope, described in MariaDB's ``sql/log_event.cc`` (``binlog_buf_compress``)::

    byte 0      1000 0LLL   bit 7 set: compressed; bits 4-6: algorithm (0 = zlib);
                            bits 0-2: L = bytes of the uncompressed length (1..4)
    bytes 1..L  uncompressed length, big-endian
    rest        zlib stream
"""

from __future__ import annotations

import zlib

__all__ = ["uncompress", "CompressedPayloadError"]


class CompressedPayloadError(ValueError):
    """A compressed binlog payload cannot be decoded (bad header, algorithm, zlib data or length)."""


def uncompress(data: bytes) -> bytes:
    """The uncompressed bytes of a MariaDB compressed-event payload.

    Args:
        data: the payload, starting with the envelope's header byte.

    Returns:
        The original bytes (query text or row data), exactly the announced length.

    Raises:
        CompressedPayloadError: not a zlib envelope, corrupt zlib stream, or a length other than
            the one announced in the header.
    """
    if not data:
        raise CompressedPayloadError("empty compressed payload")
    header = data[0]
    if header & 0xE0 != 0x80:
        raise CompressedPayloadError(f"header byte 0x{header:02x} is not a MariaDB zlib envelope (expected 0x8L)")
    length_bytes = header & 0x07
    if not 1 <= length_bytes <= 4 or len(data) < 1 + length_bytes:
        raise CompressedPayloadError(f"header byte 0x{header:02x} announces {length_bytes} length bytes")
    expected = int.from_bytes(data[1 : 1 + length_bytes], "big")
    try:
        out = zlib.decompress(data[1 + length_bytes :])
    except zlib.error as exc:
        raise CompressedPayloadError(f"zlib stream cannot be decompressed: {exc}") from exc
    if len(out) != expected:
        raise CompressedPayloadError(f"decompressed {len(out)} bytes but the header announces {expected}")
    return out


def compress(data: bytes) -> bytes:
    """The envelope MariaDB writes for ``data`` (used by tests)."""
    n = len(data)
    length_bytes = max(1, (n.bit_length() + 7) // 8)
    return bytes([0x80 | length_bytes]) + n.to_bytes(length_bytes, "big") + zlib.compress(data)
