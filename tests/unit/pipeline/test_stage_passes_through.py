"""A stage without transform, route or append-only reading has no work for the events of a poll
its source vouches for (``GuaranteesKeys.last_poll_keyed``): ``Stage.passes_through`` says so
only then, ``Stage.apply`` of such events gives the events themselves, and the loop skips the
stage for those polls only."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pytest

from changelake.changelog import DataChangeEvent, Op, Schema, TableId
from changelake.changelog.rowkind import RETRACT
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.base import GuaranteesKeys
from changelake.connectors.kafka.source import KafkaPipelineSource, PartitionedSource
from changelake.connectors.registry import ConnectorContext, find_factory
from changelake.errors import PipelineDataError
from changelake.pipeline.clock import StopClock
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.loop import run_loop
from changelake.pipeline.stage import Stage

T = TableId("shop", "orders")
S = Schema.of([("id", DataType(TypeRoot.INT, False)), ("v", DataType(TypeRoot.STRING))], ["id"])
MYSQL = {"type": "mysql", "hostname": "127.0.0.1", "username": "cdc", "password": "", "tables": "shop.orders"}
KAFKA = {"properties.bootstrap.servers": "127.0.0.1:9092", "topic": "orders"}


def _stage(source: Mapping[str, Any] | None = None, **blocks: Any) -> Stage:
    block = {"pipeline": {"name": "p"}, "source": dict(source or MYSQL),
             "sink": {"type": "kafka", "properties.bootstrap.servers": "127.0.0.1:9092"}, **blocks}
    return Stage(parse_pipeline(block, env={}))


def _mysql() -> Any:
    return find_factory("mysql").create_source({k: v for k, v in MYSQL.items() if k != "type"},
                                               ConnectorContext("p"))  # unopened: no I/O


def test_the_mysql_source_vouches_for_its_keys_and_the_kafka_sources_do_not():
    assert isinstance(_mysql(), GuaranteesKeys)
    kafka = find_factory("kafka").create_source(KAFKA, ConnectorContext("p"))
    assert isinstance(kafka, KafkaPipelineSource)
    assert not isinstance(kafka, GuaranteesKeys) and not isinstance(PartitionedSource(kafka), GuaranteesKeys)


def test_a_stage_without_transform_route_or_append_only_passes_a_keyed_source_through():
    assert _stage().passes_through(_mysql())


@pytest.mark.parametrize("blocks", [
    {"transform": [{"source-table": "shop.orders", "projection": "*"}]},
    {"transform": [{"source-table": "shop.other", "projection": "*", "filter": "id > 1"}]},
    {"route": [{"source-table": "shop.orders", "sink-table": "lake.orders"}]},
    {"route": [{"source-table": "shop.other", "sink-table": "lake.other"}]},
], ids=["transform", "transform-of-another-table", "route", "route-of-another-table"])
def test_a_transform_or_route_rule_keeps_the_stage(blocks):
    assert not _stage(**blocks).passes_through(_mysql())


def test_append_only_reading_keeps_the_stage():
    stage = _stage({**MYSQL, "scan.read-changelog-as-append-only.enabled": "true"})
    assert stage.append_only and not stage.passes_through(_mysql())


def test_a_source_that_does_not_vouch_for_its_keys_keeps_the_stage():
    kafka = find_factory("kafka").create_source(KAFKA, ConnectorContext("p"))
    assert not _stage().passes_through(kafka)
    assert not _stage().passes_through(PartitionedSource(kafka))
    assert not _stage().passes_through(object())


def test_a_stage_that_remembers_a_schema_keeps_itself():
    # a TRUNCATE without schema would take that schema: not the fresh stage the source's guarantee is about
    stage = _stage()
    stage.apply([DataChangeEvent(T, Op.CREATE, None, {"id": 1, "v": "a"}, S, 0, {"i": 1})])
    assert not stage.passes_through(_mysql())


def test_apply_gives_back_the_events_the_mysql_source_vouches_for():
    """What the skip relies on: ``apply`` of vouched-for events is those very events, in order."""
    source = _mysql()
    s2 = Schema.of([*((c.name, c.type) for c in S.columns), ("w", DataType(TypeRoot.BIGINT))], ["id"])
    events = [
        DataChangeEvent(T, Op.READ, None, {"id": 1, "v": "a"}, S, 0, {"i": 1}),
        DataChangeEvent(T, Op.UPDATE, {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, S, 5, {"i": 2}),
        DataChangeEvent(T, Op.CREATE, None, {"id": 2, "v": "c", "w": 7}, s2, 6, {"i": 3}),  # after an ALTER
        DataChangeEvent(T, Op.TRUNCATE, None, None, None, 7, {"i": 4}),  # definition unknown to the reader
        DataChangeEvent(T, Op.DELETE, {"id": 2, "v": "c", "w": 7}, None, s2, 8, {"i": 5}),
        DataChangeEvent(TableId("shop", "gone"), Op.TRUNCATE, None, None, None, 9, {"i": 6}),  # nothing known
    ]
    assert source._keyed(events)
    assert events[3].schema is s2 and events[5].schema is None  # the source gives the truncate its schema
    out = _stage().apply(events)
    assert len(out) == len(events) and all(a is b for a, b in zip(out, events))


def test_the_mysql_source_does_not_vouch_for_a_key_it_may_read_as_null():
    """A zero or partial date in a DATE / DATETIME / TIMESTAMP key column is read as None: the stage refuses it."""
    for root in (TypeRoot.DATE, TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        source = _mysql()
        keyed = Schema.of([("d", DataType(root, False)), ("v", DataType(TypeRoot.INT))], ["d"])
        events = [DataChangeEvent(T, Op.READ, None, {"id": 1, "v": "a"}, S, 0, {"i": 1}),
                  DataChangeEvent(TableId("shop", "days"), Op.READ, None, {"d": None, "v": 1}, keyed, 0, {"i": 2})]
        assert not source._keyed(events), root
        with pytest.raises(PipelineDataError, match=r"primary-key column\(s\) \['d'\] of table shop.days"):
            _stage().apply(events)
        assert source._keyed(events[:1])  # the next poll without such a table is vouched for again
    time_key = Schema.of([("t", DataType(TypeRoot.TIME, False))], ["t"])  # TIME is never read as None
    assert _mysql()._keyed([DataChangeEvent(T, Op.READ, None, {"t": 1}, time_key, 0, {"i": 1})])


def test_a_change_event_without_schema_ends_the_mysql_sources_guarantee():
    source = _mysql()
    assert source._keyed([DataChangeEvent(T, Op.READ, None, {"id": 1, "v": "a"}, S, 0, {"i": 1})])
    assert not source._keyed([DataChangeEvent(T, Op.CREATE, None, {"id": 2, "v": "b"}, None, 0, {"i": 2})])
    truncate = [DataChangeEvent(T, Op.TRUNCATE, None, None, None, 0, {"i": 3})]
    assert not source._keyed(truncate) and truncate[0].schema is None  # the stage gives it its inferred schema
    assert not source._keyed([DataChangeEvent(T, Op.READ, None, {"id": 1, "v": "a"}, S, 0, {"i": 4})])


# -- the loop ------------------------------------------------------------------------------------


class _KeyedList:
    """A positioned source over polls of events, each poll with its ``last_poll_keyed``."""

    changelog_mode = RETRACT

    def __init__(self, polls: list[tuple[bool, list[DataChangeEvent]]]) -> None:
        self.polls = list(polls)
        self.next = 0
        self.last_poll_keyed = True

    def open(self) -> None:
        pass

    def poll(self, max_events: int = 100, timeout_s: float = 0.5) -> list[DataChangeEvent]:
        if self.next >= len(self.polls):
            return []
        self.last_poll_keyed, events = self.polls[self.next]
        self.next += 1
        return events

    @property
    def position(self) -> dict[str, Any]:
        return {"poll": self.next}

    def caught_up(self) -> bool:
        return self.next >= len(self.polls)

    def close(self) -> None:
        pass


class _Unkeyed(_KeyedList):
    """The same source without the declaration (``last_poll_keyed`` under another name)."""

    def __init__(self, polls: list[tuple[bool, list[DataChangeEvent]]]) -> None:
        super().__init__(polls)
        del self.last_poll_keyed

    def poll(self, max_events: int = 100, timeout_s: float = 0.5) -> list[DataChangeEvent]:
        if self.next >= len(self.polls):
            return []
        self.next += 1
        return self.polls[self.next - 1][1]


class _Sink:
    changelog_mode = RETRACT

    def __init__(self) -> None:
        self.written: list[list[DataChangeEvent]] = []

    def open(self) -> None:
        pass

    def write(self, events: Sequence[DataChangeEvent]) -> None:
        self.written.append(list(events))

    def commit(self, position: Mapping[str, Any]) -> None:
        pass

    def stored_position(self) -> None:
        return None

    def close(self) -> None:
        pass


def _polls() -> list[tuple[bool, list[DataChangeEvent]]]:
    return [
        (True, [DataChangeEvent(T, Op.READ, None, {"id": i, "v": "a"}, S, 0, {"i": i}) for i in (1, 2)]),
        (False, [DataChangeEvent(T, Op.CREATE, None, {"id": 3, "v": "b"}, S, 0, {"i": 3})]),
        (True, [DataChangeEvent(T, Op.UPDATE, {"id": 3, "v": "b"}, {"id": 3, "v": "c"}, S, 0, {"i": 4})]),
    ]


def _run(source: Any, stage: Stage, monkeypatch: pytest.MonkeyPatch) -> tuple[_Sink, list[int]]:
    calls: list[int] = []
    real = Stage.apply

    def spy(self: Stage, events: Sequence[DataChangeEvent], reject: Any = None) -> list[DataChangeEvent]:
        calls.append(len(events))
        return real(self, events, reject)

    monkeypatch.setattr(Stage, "apply", spy)
    sink = _Sink()
    stats = run_loop("p", sink, lambda _stored: source, stage, StopClock(30, None), until_caught_up=True)
    assert stats.events == 4
    return sink, calls


def test_the_loop_skips_the_stage_for_the_polls_the_source_vouches_for_only(monkeypatch):
    polls = _polls()
    sink, calls = _run(_KeyedList(polls), _stage(), monkeypatch)
    assert calls == [1]  # the poll the source did not vouch for
    assert [[e for e in w] for w in sink.written] == [events for _, events in polls]
    assert all(a is b for w, (_, events) in zip(sink.written, polls) for a, b in zip(w, events))


@pytest.mark.parametrize("case", ["transform", "not-declared"])
def test_the_loop_keeps_the_stage_for_every_poll_otherwise(monkeypatch, case):
    polls = _polls()
    if case == "transform":
        stage, source = _stage(transform=[{"source-table": "shop.orders", "projection": "*"}]), _KeyedList(polls)
    else:
        stage, source = _stage(), _Unkeyed(polls)
    sink, calls = _run(source, stage, monkeypatch)
    assert calls == [2, 1, 1]
    assert [[(e.op, e.after) for e in w] for w in sink.written] == [[(e.op, e.after) for e in events] for _, events in polls]
