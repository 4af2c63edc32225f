"""changelake.collector: the young-generation threshold of a run, and that it is put back."""

import gc

from changelake.collector import YOUNG_THRESHOLD, young_generation


def test_the_threshold_is_raised_inside_the_block_and_put_back_after():
    before = gc.get_threshold()
    gc.set_threshold(700, before[1], before[2])
    try:
        with young_generation():
            assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])
            with young_generation():  # nested: nothing changes, nothing is put back early
                assert gc.get_threshold()[0] == YOUNG_THRESHOLD
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_threshold() == (700, before[1], before[2])
    finally:
        gc.set_threshold(*before)


def test_the_threshold_is_put_back_when_the_run_fails():
    before = gc.get_threshold()
    gc.set_threshold(700, before[1], before[2])
    try:
        try:
            with young_generation():
                raise RuntimeError("run failed")
        except RuntimeError:
            pass
        assert gc.get_threshold()[0] == 700
    finally:
        gc.set_threshold(*before)


def test_a_disabled_collector_or_a_higher_threshold_is_left_alone():
    before = gc.get_threshold()
    try:
        gc.set_threshold(YOUNG_THRESHOLD * 2, before[1], before[2])
        with young_generation():
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD * 2
        gc.set_threshold(700, before[1], before[2])
        gc.disable()
        with young_generation():
            assert gc.get_threshold()[0] == 700
    finally:
        gc.enable()
        gc.set_threshold(*before)


class _Consumer:
    """Records the collector's threshold while the source consumes (no records)."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list:
        self.seen.append(gc.get_threshold()[0])
        return []


def test_each_poll_of_the_upsert_kafka_source_runs_with_the_raised_threshold():
    from changelake.changelog import DataType, Schema
    from changelake.connectors import upsert_kafka

    schema = Schema.of([("id", DataType.of("BIGINT")), ("name", DataType.of("STRING"))], primary_key=["id"])
    source = upsert_kafka.create_source({"connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": "h:9092",
                                         "key.format": "json", "value.format": "json"}, schema)
    consumer = _Consumer()
    source._consumer = consumer
    before = gc.get_threshold()
    gc.set_threshold(700, before[1], before[2])
    try:
        assert source.poll(0.0) == []
        assert source.poll_batches(timeout_s=0.0) == []
        assert consumer.seen == [YOUNG_THRESHOLD, YOUNG_THRESHOLD]
        assert gc.get_threshold()[0] == 700
    finally:
        gc.set_threshold(*before)
