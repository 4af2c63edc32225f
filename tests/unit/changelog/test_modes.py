"""check_changelog_mode: the planner's refusal of updates/deletes an append-only sink cannot take."""

from __future__ import annotations

import pytest

from changelake.changelog import INSERT_ONLY, RETRACT, UPSERT, RowKind, UnsupportedChangelogError
from changelake.changelog.aggregate import AggSpec, GroupAggregate
from changelake.changelog.modes import check_changelog_mode, describe_mode

SINK = "default_catalog.default_database.pageviews_sink"


def pv_uv() -> GroupAggregate:
    return GroupAggregate(
        ["user_region"], [AggSpec.count_star("pv"), AggSpec.count("uv", "user_id", distinct=True)]
    )


def test_retract_into_insert_only_sink_is_refused_with_flinks_message() -> None:
    agg = pv_uv()
    with pytest.raises(UnsupportedChangelogError) as ei:
        check_changelog_mode(agg.changelog_mode, INSERT_ONLY, SINK, node_description=agg.describe())
    msg = str(ei.value)
    assert msg.startswith(
        "Table sink 'default_catalog.default_database.pageviews_sink' doesn't support consuming update and "
        "delete changes which is produced by node GroupAggregate(groupBy=[user_region], "
        "select=[user_region, COUNT(*) AS pv, COUNT(DISTINCT user_id) AS uv])."
    )
    assert "'upsert-kafka' connector" in msg
    assert "debezium-json, canal-json, maxwell-json" in msg
    assert "accepts [I] but the input is [I,UB,UA,D]" in msg
    assert ei.value.sink == SINK  # type: ignore[attr-defined]
    assert ei.value.unsupported == frozenset(RETRACT - INSERT_ONLY)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("produced", "what"),
    [
        (frozenset({RowKind.INSERT, RowKind.UPDATE_AFTER}), "update"),
        (frozenset({RowKind.INSERT, RowKind.DELETE}), "delete"),
        (UPSERT, "update and delete"),
    ],
)
def test_message_names_the_kind_of_change(produced: frozenset[RowKind], what: str) -> None:
    with pytest.raises(UnsupportedChangelogError, match=f"doesn't support consuming {what} changes which is produced by an upstream node"):
        check_changelog_mode(produced, INSERT_ONLY, "t")


def test_upsert_sink_takes_retract_stream_and_drops_update_before() -> None:
    assert check_changelog_mode(RETRACT, UPSERT, SINK) == frozenset({RowKind.UPDATE_BEFORE})
    assert check_changelog_mode(UPSERT, UPSERT, SINK) == frozenset()


def test_accepting_sinks_pass() -> None:
    assert check_changelog_mode(RETRACT, RETRACT, SINK) == frozenset()
    assert check_changelog_mode(INSERT_ONLY, INSERT_ONLY, SINK) == frozenset()
    assert check_changelog_mode(INSERT_ONLY, UPSERT, SINK) == frozenset()


def test_upsert_sink_without_delete_refuses_deletes() -> None:
    accepted = frozenset({RowKind.INSERT, RowKind.UPDATE_AFTER})
    with pytest.raises(UnsupportedChangelogError, match="consuming delete changes"):
        check_changelog_mode(RETRACT, accepted, SINK)


def test_describe_mode() -> None:
    assert describe_mode(RETRACT) == "[I,UB,UA,D]"
    assert describe_mode(UPSERT) == "[I,UA,D]"
    assert describe_mode(INSERT_ONLY) == "[I]"
