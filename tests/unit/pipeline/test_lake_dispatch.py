"""Pipeline 2 picks its lake sink, checkpoint store and lake reader by ``sink.type`` (no services)."""

from __future__ import annotations

import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.iceberg import IcebergSink
from changelake.connectors.paimon import PaimonSink
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import open_lake_sink, read_lake_checkpoint, run_pipeline, write_lake_checkpoint
from changelake.pipeline.verify import read_lake_table

SOURCE = {"type": "kafka", "properties.bootstrap.servers": "127.0.0.1:1", "topic": "db.t", "value.format": "debezium-json"}


def sink_block(lake: str, tmp_path) -> dict:
    if lake == "paimon":
        return {"type": "paimon", "catalog.properties.warehouse": str(tmp_path / "paimon")}
    (tmp_path / "wh").mkdir()
    return {"type": "iceberg", "catalog.properties.uri": f"sqlite:///{tmp_path}/c.db",
            "catalog.properties.warehouse": f"file://{tmp_path}/wh"}


@pytest.mark.parametrize(("lake", "sink_class"), [("iceberg", IcebergSink), ("paimon", PaimonSink)])
def test_sink_checkpoint_and_reader_follow_the_sink_type(lake, sink_class, tmp_path):
    defn = parse_pipeline({"pipeline": {"name": "p"}, "source": SOURCE, "sink": sink_block(lake, tmp_path)}, env={})
    sink = open_lake_sink(defn)
    try:
        assert isinstance(sink, sink_class)
        assert read_lake_checkpoint(sink, "p") == {}
        write_lake_checkpoint(sink, "p", {"db.t/0": 7})
        assert read_lake_checkpoint(sink, "p") == {"db.t/0": 7}
        schema = Schema.of([("id", parse_data_type("INT NOT NULL"))], ["id"])
        sink.write(TableId("db", "t"), [ChangelogRow.insert({"id": 1})], schema, {"db.t/0": 1})
    finally:
        sink.close()
    assert read_lake_table(defn, TableId("db", "t")).column("id").to_pylist() == [1]


def test_unsupported_pair_names_the_supported_ones(tmp_path):
    # mysql -> paimon runs directly now (Flink CDC does); a partitioned kafka source still needs a lake sink
    defn = parse_pipeline({"source": SOURCE, "sink": {"type": "kafka", "properties.bootstrap.servers": "127.0.0.1:1"}},
                          env={})
    with pytest.raises(OptionValidationError, match="kafka -> iceberg, kafka -> paimon"):
        run_pipeline(defn)


def test_unknown_connector_type_lists_the_registered_ones(tmp_path):
    defn = parse_pipeline({"source": {"type": "postgres"}, "sink": sink_block("paimon", tmp_path)}, env={})
    with pytest.raises(OptionValidationError, match="Registered identifiers: iceberg, kafka, mysql, paimon, upsert-kafka"):
        run_pipeline(defn)
