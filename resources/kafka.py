"""``KafkaResource``: a Kafka cluster -- the pipeline source and sink (Flink CDC's ``kafka``
connector), an admin client, and a lake pipeline's lag."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import dagster as dg
from pydantic import Field

if TYPE_CHECKING:
    from changelake.pipeline.definition import PipelineDefinition

__all__ = ["KafkaResource"]


class KafkaResource(dg.ConfigurableResource):
    """A Kafka cluster. Nothing connects until a method is called."""

    bootstrap_servers: str = Field(description="Comma-separated host:port list of Kafka brokers.")
    properties: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Kafka client properties (without the 'properties.' prefix), e.g. security settings.",
    )

    def connection_options(self) -> dict[str, str]:
        """``properties.bootstrap.servers`` and ``properties.<key>`` of :attr:`properties` (Flink's keys)."""
        return {"properties.bootstrap.servers": self.bootstrap_servers,
                **{f"properties.{k}": str(v) for k, v in self.properties.items()}}

    def options_for(self, connector: str) -> dict[str, str]:
        """:meth:`connection_options` (the registry names this resource's kind for ``connector``)."""
        return self.connection_options()

    def client_config(self) -> dict[str, str]:
        """librdkafka configuration (``bootstrap.servers`` plus :attr:`properties`)."""
        return {"bootstrap.servers": self.bootstrap_servers, **{k: str(v) for k, v in self.properties.items()}}

    def source(self, options: Mapping[str, str], pipeline: str) -> Any:
        """A ``kafka`` pipeline source (topics of change events, per-partition offsets), unopened.

        ``options``: the source's options, Flink CDC's keys (``topic``, ``value.format``,
        ``scan.startup.mode``, ...); the cluster's connection options fill what they leave out.
        ``pipeline`` names the consumer group (``changelake-<pipeline>``).

        Raises:
            OptionValidationError: unknown or invalid options (the supported keys are listed).
        """
        from changelake.connectors.registry import ConnectorContext, find_factory

        return find_factory("kafka").create_source({**self.connection_options(), **options}, ConnectorContext(pipeline))

    def sink(self, options: Mapping[str, str], pipeline: str) -> Any:
        """A ``kafka`` pipeline sink (one topic per table, Debezium-JSON by default), unopened.

        ``pipeline`` names the transactional ids of ``sink.delivery-guarantee: exactly-once``.

        Raises:
            OptionValidationError: unknown or invalid options (the supported keys are listed).
        """
        from changelake.connectors.registry import ConnectorContext, find_factory

        return find_factory("kafka").create_sink({**self.connection_options(), **options}, ConnectorContext(pipeline))

    @contextlib.contextmanager
    def admin_client(self) -> Iterator[Any]:
        """A ``confluent_kafka.admin.AdminClient`` on the cluster (created on entry)."""
        from confluent_kafka.admin import AdminClient

        from changelake.connectors.kafka_common import with_logger

        yield AdminClient(with_logger(self.client_config()))

    def lag(self, defn: "PipelineDefinition", timeout_s: float = 10.0) -> dict[str, tuple[int, int]]:
        """Per ``topic/partition`` of the Kafka -> lake pipeline ``defn`` (bound to this cluster):
        (the lake checkpoint, Kafka's end offset); the difference is the lag in offsets."""
        from changelake.pipeline.lake_checkpoint import kafka_lag

        return kafka_lag(defn, timeout_s=timeout_s)
