"""``changelake changelog`` with Flink's plain kafka connector: a Debezium topic read as a changelog."""

from __future__ import annotations

import argparse
import io

import pytest

from changelake.changelog import ChangelogRow, RowKind, Schema, parse_data_type
from cli import changelog as changelog_cmd
from changelake.connectors.kafka_table import create_sink

pytestmark = pytest.mark.integration


def test_debezium_topic_prints_as_a_retract_changelog(kafka_bootstrap, topic_factory):
    topic = topic_factory()
    schema = Schema.of([("id", parse_data_type("INT")), ("phone", parse_data_type("STRING"))])
    sink = create_sink({"connector": "kafka", "topic": topic, "properties.bootstrap.servers": kafka_bootstrap,
                        "value.format": "debezium-json"}, schema)
    sink.open()
    for kind, phone in [(RowKind.INSERT, "2222"), (RowKind.UPDATE_BEFORE, "2222"), (RowKind.UPDATE_AFTER, "1234")]:
        sink.write(ChangelogRow(kind, {"id": 4, "phone": phone}))
    sink.write(ChangelogRow(RowKind.DELETE, {"id": 4, "phone": "1234"}))
    sink.flush()
    sink.close()

    parser = argparse.ArgumentParser()
    changelog_cmd.register(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    args = parser.parse_args([
        "changelog", "--schema", "id INT, phone STRING", "--option", "connector=kafka", "--option", f"topic={topic}",
        "--option", f"properties.bootstrap.servers={kafka_bootstrap}", "--option", "value.format=debezium-json",
    ])
    assert changelog_cmd.run(args, out=out) == 0
    assert out.getvalue().splitlines() == ["+I[4, 2222]", "-U[4, 2222]", "+U[4, 1234]", "-D[4, 1234]"]
