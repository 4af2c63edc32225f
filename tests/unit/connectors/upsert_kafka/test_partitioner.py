"""murmur2 equals Kafka's Java Utils.murmur2 (vectors from Kafka's UtilsTest.testMurmur2)."""

import pytest

from changelake.connectors.upsert_kafka.partitioner import LIBRDKAFKA_PARTITIONER, murmur2, partition_for, to_positive

JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize("data,expected", JAVA_VECTORS)
def test_murmur2_matches_java_client(data, expected):
    assert murmur2(data) == expected


def test_partition_for_is_to_positive_modulo():
    # toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16
    assert to_positive(-790332482) == 1357151166
    assert partition_for(b"foobar", 50) == 16
    assert all(0 <= partition_for(bytes([i]), 6) < 6 for i in range(256))


def test_partition_for_refuses_zero_partitions():
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for(b"k", 0)


def test_librdkafka_partitioner_name():
    assert LIBRDKAFKA_PARTITIONER == "murmur2_random"
