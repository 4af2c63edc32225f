"""A bounded run of several consumer-group members stops only when the whole subscription is read.

Found by following the README with ``pipeline.parallelism: 2`` on the demo's topics (one topic per
table, one partition each): under cooperative-sticky rebalancing a joining member's first
assignment is empty and the other member's moved partitions are revoked, so both members called
themselves caught up and a bounded run exited 0 with a table short of its last records.
"""

from __future__ import annotations

import decimal
import logging
import threading
import time
import uuid

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.kafka import KafkaPipelineSink, KafkaPipelineSource

pytestmark = pytest.mark.integration

SCHEMA = Schema.of([("id", DataType(TypeRoot.INT, nullable=False)), ("price", DataType.decimal(10, 2))], ["id"])
ROWS = 300
#: both rebalance protocols the source joins with: Kafka's consumer protocol (KIP-848, the default)
#: and the classic one (chosen by a classic client-side option such as session.timeout.ms)
PROTOCOLS = pytest.mark.parametrize("group_props", [{}, {"properties.session.timeout.ms": "6000"}],
                                    ids=["consumer-protocol", "classic-protocol"])


def _uid() -> str:
    return uuid.uuid4().hex[:10]


@PROTOCOLS
@pytest.mark.parametrize("join_delay_s, work_s", [(0.0, 0.0), (1.0, 0.02)], ids=["together", "joins-while-reading"])
def test_bounded_group_members_stop_only_when_every_partition_is_absorbed(kafka_bootstrap, join_delay_s, work_s,
                                                                         group_props):
    db = f"gb_{_uid()}"
    tables = [TableId(db, f"t{i}") for i in range(4)]
    with KafkaPipelineSink({"properties.bootstrap.servers": kafka_bootstrap}, pipeline_name=f"p-{_uid()}") as sink:
        for table in tables:
            sink.write([DataChangeEvent(table, Op.CREATE, None, {"id": i, "price": decimal.Decimal("1.00")}, SCHEMA)
                        for i in range(ROWS)])
        sink.commit({"pos": 1})

    # The "lake checkpoint" of this test: the next offset per partition that a member absorbed,
    # updated by a member only for what it read itself (as a worker's checkpoint entries are).
    store: dict[tuple[str, int], int] = {}
    lock = threading.Lock()

    def stored(tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        with lock:
            return dict(store)

    group = f"g-{_uid()}"
    read: dict[str, list[tuple[str, int]]] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def member(name: str, start_delay_s: float) -> None:
        try:
            threading.Event().wait(start_delay_s)
            src = KafkaPipelineSource({"properties.bootstrap.servers": kafka_bootstrap, "topic-pattern": f"{db}\\..*",
                                       "scan.bounded.mode": "latest-offset", **group_props},
                                      group_id=group, timeout_s=10)
            src.open_group(stored)
            try:
                for _ in range(3000):
                    records = src.poll(max_records=10, timeout_s=0.2)
                    time.sleep(work_s)  # a sink's work: the other member joins while this one reads
                    read[name].extend((r.topic, r.offset) for r in records)
                    with lock:
                        for tp, pos in src.positions().items():
                            store[tp] = max(store.get(tp, 0), pos)
                    if not records and src.caught_up():
                        with lock:  # caught up means: no partition of the subscription is left unread
                            short = {t: store.get((str(t), 0), 0) for t in tables if store.get((str(t), 0), 0) < ROWS}
                        assert not short, f"member {name} stopped while {short} were not absorbed"
                        return
                raise AssertionError(f"member {name} never caught up: positions {src.positions()}")
            finally:
                src.close()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=member, args=("a", 0.0)), threading.Thread(target=member, args=("b", join_delay_s))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    # Every record of every topic was read by some member before both stopped.
    got = {(topic, offset) for name in read for topic, offset in read[name]}
    for table in tables:
        assert {o for t, o in got if t == str(table)} == set(range(ROWS)), str(table)
    assert all(store.get((str(t), 0), 0) >= ROWS for t in tables), store


@PROTOCOLS
def test_a_member_of_an_until_caught_up_run_is_not_caught_up_while_another_members_partitions_are_unread(
        kafka_bootstrap, group_props, caplog):
    """No ``scan.bounded.mode``: what a parallel Pipeline 2 worker run with ``until_caught_up``
    reads (issue: ``test_ddl_mid_snapshot`` lost one partition's tail with two workers). A member
    that read its own partitions to their end is not caught up while the partitions the group gave
    the other member are not absorbed in the store, and is once they are."""
    db = f"gu_{_uid()}"
    tables = [TableId(db, f"t{i}") for i in range(4)]
    with KafkaPipelineSink({"properties.bootstrap.servers": kafka_bootstrap}, pipeline_name=f"p-{_uid()}") as sink:
        for table in tables:
            sink.write([DataChangeEvent(table, Op.CREATE, None, {"id": i, "price": decimal.Decimal("1.00")}, SCHEMA)
                        for i in range(20)])
        sink.commit({"pos": 1})
    store: dict[tuple[str, int], int] = {}
    group = f"g-{_uid()}"

    def member() -> KafkaPipelineSource:
        src = KafkaPipelineSource({"properties.bootstrap.servers": kafka_bootstrap, "topic-pattern": f"{db}\\..*",
                                   **group_props}, group_id=group, timeout_s=10)
        src.open_group(lambda tps: dict(store))
        return src

    a = member()
    b = None
    try:
        for _ in range(200):  # a alone: every partition (polled, nothing stored)
            a.poll(max_records=1, timeout_s=0.2)
            if len(a.positions()) == len(tables):
                break
        assert len(a.positions()) == len(tables), a.positions()
        b = member()
        for _ in range(400):  # both poll until the group has spread the partitions over both
            a.poll(max_records=1, timeout_s=0.1)
            b.poll(max_records=100, timeout_s=0.1)
            if a.positions() and b.positions() and len(a.positions()) + len(b.positions()) == len(tables):
                break
        mine, theirs = set(b.positions()), set(a.positions())
        assert mine and theirs and len(mine | theirs) == len(tables), (mine, theirs)
        # the group runs the protocol the options chose (KIP-848's "consumer" unless a classic option is set)
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert described.type == (ConsumerGroupType.CLASSIC if group_props else ConsumerGroupType.CONSUMER), described
        _read_to_end(b)
        store.update(b.positions())  # b's partitions absorbed (as its checkpoint entries say)
        with caplog.at_level(logging.INFO, logger="changelake.connectors.kafka.source"):
            assert not b.caught_up(), f"b would stop while a's partitions {sorted(theirs)} are not absorbed"
        # and says which partitions of the other member it waits for
        waiting = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
        assert waiting and all(f"{t}/{p} at " in waiting[-1] for t, p in theirs), waiting
        _read_to_end(a)
        store.update(a.positions())
        assert b.caught_up() and a.caught_up(), (store, b.positions(), a.positions())
    finally:
        a.close()
        if b is not None:
            b.close()


def _read_to_end(src: KafkaPipelineSource, rows: int = 20) -> None:
    """Poll ``src`` until each of its partitions is past its ``rows`` records and three polls in a
    row returned nothing (a transaction marker after them stepped over)."""
    empty = 0
    for _ in range(300):
        empty = 0 if src.poll(max_records=100, timeout_s=0.2) else empty + 1
        if empty >= 3 and all(p >= rows for p in src.positions().values()):
            return
    raise AssertionError(f"never read to the end: {src.positions()}")
