"""A Dagster resource that hands out upsert-kafka table sources and sinks (Flink's ``upsert-kafka``).

A table is declared as Flink declares it: ``CREATE TABLE ... WITH (...)`` text, or its ``WITH``
options plus a :class:`~changelake.changelog.schema.Schema`. The resource adds the cluster's
``properties.bootstrap.servers`` (and any ``properties``) when the declaration has none, then the
connector's own factory validates and builds (:mod:`changelake.connectors.upsert_kafka.factory`).

Example (an asset reading a keyed topic as a changelog)::

    @dg.asset
    def regions(upsert_kafka: UpsertKafkaResource) -> int:
        with upsert_kafka.source(PAGEVIEWS_DDL) as source:
            return len(source.read_all())
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import dagster as dg
from pydantic import Field

if TYPE_CHECKING:
    from changelake.changelog.schema import Schema
    from changelake.changelog.state import KeyStateStore
    from changelake.connectors.upsert_kafka.ddl import TableDeclaration
    from changelake.connectors.upsert_kafka.sink import UpsertKafkaSink
    from changelake.connectors.upsert_kafka.source import UpsertKafkaSource

__all__ = ["UpsertKafkaResource"]


class UpsertKafkaResource(dg.ConfigurableResource):
    """Upsert-kafka tables on one Kafka cluster: ``.source(table)`` and ``.sink(table)``.

    Both return the connector unopened (no I/O until ``with``/``open()``); options are validated as
    Flink validates them and errors raise OptionValidationError naming the option.
    """

    bootstrap_servers: str = Field(description="Comma-separated host:port list of Kafka brokers.")
    properties: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Kafka client properties (without the 'properties.' prefix), e.g. security settings.",
    )

    def _declaration(self, table: Any, schema: "Schema | None") -> tuple[dict[str, str], "Schema | None"]:
        from changelake.connectors.upsert_kafka.ddl import TableDeclaration, parse_create_table

        if isinstance(table, str):
            table = parse_create_table(table)
        if isinstance(table, TableDeclaration):
            options, schema = dict(table.options), schema or table.schema
        else:
            options = {k: str(v) for k, v in table.items()}
        options.setdefault("connector", "upsert-kafka")
        options.setdefault("properties.bootstrap.servers", self.bootstrap_servers)
        for key, value in self.properties.items():
            options.setdefault(f"properties.{key}", value)
        return options, schema

    def source(
        self, table: "str | Mapping[str, str] | TableDeclaration", schema: "Schema | None" = None,
        *, store: "KeyStateStore | None" = None, **kwargs: Any,
    ) -> "UpsertKafkaSource":
        """The table as a changelog source (+I/+U/-D from key state; ``store`` keeps that state,
        memory when None). ``table``: DDL text, a TableDeclaration, or WITH options with ``schema``."""
        from changelake.connectors.upsert_kafka.factory import create_source

        options, schema = self._declaration(table, schema)
        return create_source(options, schema, store=store, **kwargs)

    def sink(
        self, table: "str | Mapping[str, str] | TableDeclaration", schema: "Schema | None" = None, **kwargs: Any
    ) -> "UpsertKafkaSink":
        """The table as an upsert sink (-U dropped, -D as tombstone). ``table`` as for :meth:`source`."""
        from changelake.connectors.upsert_kafka.factory import create_sink

        options, schema = self._declaration(table, schema)
        return create_sink(options, schema, **kwargs)
