"""Table schemas beside the change events: a fingerprint header per record, full schemas in a topic.

Why: Flink's ``debezium-json`` / ``canal-json`` readers expect the bare payload by default (no
``{"schema", "payload"}`` wrapper), and a bare JSON payload cannot say whether ``12.30`` is a
DECIMAL(12,2) or a DOUBLE, or whether ``"2026-01-01 00:00:10.01"`` is a DATETIME or a string.
So Pipeline 1 leaves the payload exactly as Flink writes it and carries the types *next to* it,
the way Kafka-based schema registries keep theirs (a compacted topic keyed by schema id):

- every change record gets two headers (Flink's readers ignore headers):
  ``changelake.schema.id`` = :func:`schema_fingerprint` of the table's schema (32 hex digits) and
  ``changelake.schema.topic`` = the topic holding the full schemas;
- the schema topic (``sink.schema-topic``, default ``changelake-schemas``, ``cleanup.policy=compact``)
  holds one record per schema: key = the fingerprint (UTF-8), value =
  ``{"table": "db.table", "schema": <Kafka Connect struct schema>}`` (the debezium-json envelope
  schema of :func:`changelake.formats.debezium_json.connect_schema_for`, which keeps exact SQL
  types and the primary key). The sink writes it before the first record that names it, in the
  same Kafka transaction under ``exactly-once`` (so a read_committed reader that sees the data
  also sees its schema);
- Pipeline 2 (:class:`SchemaResolver`) reads the schema topic named by the header
  (``read_committed``, from the beginning, cached), and decodes the record with that schema; a
  record without the header (a foreign topic) keeps the format's own typing (a schema wrapper,
  canal-json's ``mysqlType``) or falls back to inference from the JSON values.

A schema is identified by its content, not by its table: two tables with equal columns share one
record. A changed column type (``ALTER TABLE … MODIFY``) gives a new fingerprint, and the lake
table evolves when the first record with it arrives.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from changelake.changelog.schema import Schema, TableId
from changelake.connectors.errors import SourceError
from changelake.connectors.kafka_common import watermarks, with_logger
from changelake.formats.debezium_json import connect_schema_for, schema_from_connect

__all__ = [
    "SCHEMA_ID_HEADER",
    "SCHEMA_TOPIC_HEADER",
    "DEFAULT_SCHEMA_TOPIC",
    "SCHEMA_TOPIC_CONFIG",
    "schema_fingerprint",
    "encode_schema_record",
    "decode_schema_record",
    "schema_header",
    "SchemaResolver",
]

log = logging.getLogger(__name__)

#: header naming the schema of a record (32 lower-case hex digits of a SHA-256)
SCHEMA_ID_HEADER = "changelake.schema.id"
#: header naming the compacted topic that holds the schema
SCHEMA_TOPIC_HEADER = "changelake.schema.topic"
#: default of the sink option ``sink.schema-topic``
DEFAULT_SCHEMA_TOPIC = "changelake-schemas"
#: config of the schema topic (compacted: one record per fingerprint is enough)
SCHEMA_TOPIC_CONFIG = {"cleanup.policy": "compact"}


def _canonical(schema: Schema) -> dict[str, Any]:
    return connect_schema_for(schema, None)


def schema_fingerprint(schema: Schema) -> str:
    """32 hex digits of the SHA-256 of the schema's canonical JSON (column names, exact types,
    nullability, comments, primary key; not the table name). Equal schemas, equal fingerprints."""
    text = json.dumps(_canonical(schema), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def encode_schema_record(table: TableId, schema: Schema) -> tuple[bytes, bytes]:
    """The (key, value) of the schema-topic record of ``schema``: key = fingerprint, value =
    ``{"table": "db.table", "schema": <Connect struct schema>}`` as compact JSON (UTF-8)."""
    value = {"table": str(table), "schema": _canonical(schema)}
    return (schema_fingerprint(schema).encode("ascii"),
            json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def decode_schema_record(value: bytes) -> tuple[str, Schema]:
    """``(table text, Schema)`` of a schema-topic record value.

    Raises:
        ValueError: not JSON, or not ``{"table", "schema"}`` with a Connect envelope schema.
    """
    doc = json.loads(value.decode("utf-8"))
    if not isinstance(doc, dict) or "schema" not in doc:
        raise ValueError("a schema record is a JSON object with 'table' and 'schema'")
    return str(doc.get("table") or ""), schema_from_connect(doc["schema"])


def schema_header(headers: list[tuple[str, bytes]] | None) -> tuple[str, str] | None:
    """``(schema topic, fingerprint)`` named by a record's headers, or None when it has none."""
    topic = fingerprint = None
    for name, value in headers or ():
        if name == SCHEMA_ID_HEADER and value:
            fingerprint = value.decode("ascii", "replace")
        elif name == SCHEMA_TOPIC_HEADER and value:
            topic = value.decode("utf-8", "replace")
    if fingerprint is None:
        return None
    return topic or DEFAULT_SCHEMA_TOPIC, fingerprint


class SchemaResolver:
    """Resolves fingerprints to schemas by reading schema topics (Pipeline 2's side).

    Args:
        properties: Kafka client config (``bootstrap.servers``, security settings); producer-only
            keys are ignored by the consumer.
        timeout_s: how long one read of a schema topic may take, and how long an unknown
            fingerprint is waited for (a schema written at-least-once may lag its data), seconds.

    The first lookup of a topic reads it from the beginning to its end (``read_committed``); an
    unknown fingerprint re-reads from where the last read stopped, waiting up to ``timeout_s`` the
    first time (later lookups of a fingerprint never found do not wait). Not thread-safe.
    """

    def __init__(self, properties: Mapping[str, str], timeout_s: float = 30.0) -> None:
        self._properties = dict(properties)
        self._timeout_s = timeout_s
        self._schemas: dict[str, tuple[str, Schema]] = {}
        self._next: dict[tuple[str, int], int] = {}
        self._missing: set[str] = set()  # waited for once in vain: later lookups read once, no wait

    def resolve(self, topic: str, fingerprint: str) -> tuple[str, Schema]:
        """``(table text, Schema)`` of ``fingerprint`` in schema topic ``topic``.

        Raises:
            SourceError: the fingerprint is not in the topic within ``timeout_s`` seconds, or the
                topic cannot be read (names both).
        """
        found = self._schemas.get(fingerprint)
        if found is not None:
            return found
        deadline = time.monotonic() + (0.0 if fingerprint in self._missing else self._timeout_s)
        while True:
            self._read(topic)
            found = self._schemas.get(fingerprint)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                self._missing.add(fingerprint)
                raise SourceError(
                    f"schema {fingerprint} (header {SCHEMA_ID_HEADER!r}) is not in schema topic {topic!r} "
                    f"after {self._timeout_s:g} s; was the topic deleted or written by another cluster?"
                )
            time.sleep(0.2)

    def _read(self, topic: str) -> None:
        conf: dict[str, Any] = {k: v for k, v in self._properties.items()
                                if not k.startswith(("transaction", "acks", "enable.idempotence", "linger",
                                                     "partitioner", "compression", "batch"))}
        # fetch.wait.max.ms: the read ends on the partition-EOF event, which comes with the first
        # fetch response that finds nothing past the end; librdkafka's default lets the broker hold
        # that response for 500 ms (fetch.min.bytes not reached), a wait every pipeline open paid
        conf.update({"group.id": "changelake-schema-reader", "enable.auto.commit": False,
                     "isolation.level": "read_committed", "enable.partition.eof": True,
                     "fetch.wait.max.ms": 10})
        consumer = Consumer(with_logger(conf))
        try:
            pending: set[int] = set()
            assignment = []
            for p, (_low, high) in watermarks(consumer, topic, self._timeout_s).items():
                start = self._next.get((topic, p), 0)
                if high > start:
                    pending.add(p)
                    assignment.append(TopicPartition(topic, p, start))
            if not assignment:
                return
            consumer.assign(assignment)
            deadline = time.monotonic() + self._timeout_s
            while pending and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(int(msg.partition() or 0))
                        self._next[(topic, int(msg.partition() or 0))] = int(msg.offset() or 0)
                        continue
                    raise SourceError(f"cannot read schema topic {topic!r}: {err.str()}")
                self._next[(topic, int(msg.partition() or 0))] = int(msg.offset() or 0) + 1
                key, value = msg.key(), msg.value()
                if not key or not value:
                    continue
                try:
                    self._schemas[key.decode("ascii", "replace")] = decode_schema_record(value)
                except (ValueError, TypeError) as exc:
                    log.warning("skipping unreadable record at offset %s of schema topic %r: %s",
                                msg.offset(), topic, exc)
        except KafkaException as exc:
            raise SourceError(f"cannot read schema topic {topic!r}: {exc}") from exc
        finally:
            consumer.close()
