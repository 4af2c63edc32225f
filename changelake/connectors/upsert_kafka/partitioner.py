"""Kafka's default partitioner for keyed records: ``toPositive(murmur2(keyBytes)) % numPartitions``.

This is what Flink's upsert-kafka sink relies on (it sets no partitioner; the Java producer's
default hashes the key). librdkafka's equivalent is ``partitioner=murmur2_random``
(:data:`LIBRDKAFKA_PARTITIONER`); its default ``consistent_random`` (CRC32) places keys
elsewhere. :func:`murmur2` is a pure-Python port of ``org.apache.kafka.common.utils.Utils.murmur2``
so code can predict (and tests can prove) where a key lands.
"""

from __future__ import annotations

__all__ = ["LIBRDKAFKA_PARTITIONER", "murmur2", "to_positive", "partition_for"]

#: The librdkafka ``partitioner`` setting that matches the Java client's default for keyed records.
LIBRDKAFKA_PARTITIONER = "murmur2_random"

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """32-bit murmur2 of ``data`` exactly as Kafka's Java ``Utils.murmur2``; a signed int32."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rem = length & 3
    if rem == 3:
        h ^= data[n4 + 2] << 16
    if rem >= 2:
        h ^= data[n4 + 1] << 8
    if rem >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: ``number & 0x7fffffff``."""
    return number & 0x7FFFFFFF


def partition_for(key: bytes, num_partitions: int) -> int:
    """The partition the Java producer (and librdkafka ``murmur2_random``) picks for a non-null key.

    Raises ValueError if ``num_partitions`` < 1.
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
