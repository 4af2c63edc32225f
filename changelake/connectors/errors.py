"""Errors of the connectors layer."""

from __future__ import annotations

from changelake.errors import ChangelakeError, OptionValidationError

__all__ = [
    "ConnectorError", "KafkaUnavailableError", "OptionValidationError", "RecordError", "SinkFlushError", "SourceError",
    "SourceTableNotFoundError",
]


class ConnectorError(ChangelakeError):
    """Base class of connector errors."""


class SinkFlushError(ConnectorError):
    """Records could not be delivered to Kafka (names topic and partition when known).

    Attributes:
        topic, partition: where the first failed record was going, or None.
        failed: how many records failed (0 when the error is not about delivery).
    """

    def __init__(self, message: str, *, topic: str | None = None, partition: int | None = None,
                 failed: int = 0) -> None:
        self.topic, self.partition, self.failed = topic, partition, failed
        super().__init__(message)


class SourceError(ConnectorError):
    """A source cannot continue (e.g. a stored binlog position no longer exists on the server)."""


class SourceTableNotFoundError(SourceError):
    """The source table does not exist now (e.g. MySQL's ``ER_NO_SUCH_TABLE``, 1146, after a
    ``DROP TABLE`` or ``RENAME TABLE``): its key state is empty. Raised only on that precise
    signal, never for a missing database, a connection failure or a missing privilege.

    Attributes:
        table: the table, ``db.table``.
    """

    def __init__(self, message: str, *, table: str) -> None:
        self.table = table
        super().__init__(message)


class KafkaUnavailableError(ConnectorError):
    """No Kafka broker answered within the client's timeout where a connector first needed one
    (sink ``open()``/topic creation/stored position, source ``open()``).

    The message is ``cannot reach Kafka at <bootstrap.servers> within <N> s (<client error>)``; it
    names the addresses only, never a SASL password or the other ``properties.*``.

    What to do: start the broker, or fix ``properties.bootstrap.servers`` (for the local services,
    ``KAFKA_BOOTSTRAP_SERVERS``; ``changelake services status`` shows whether Kafka runs).

    Attributes:
        bootstrap_servers: the ``bootstrap.servers`` the client was given (``host:port[,...]``).
        timeout_s: how long the client waited, seconds.
        kafka_error: the client's error (a ``confluent_kafka.KafkaError``), or None.
    """

    def __init__(self, message: str, *, bootstrap_servers: str, timeout_s: float,
                 kafka_error: object | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout_s = timeout_s
        self.kafka_error = kafka_error
        super().__init__(message)


class RecordError(ConnectorError):
    """The change in one Kafka record cannot be applied (e.g. its row lacks a primary-key column).

    The message names the topic, partition, offset, table and the reason; the original error is
    the ``__cause__``. What to do: fix the producer of the record, or set
    ``<format>.ignore-parse-errors: true`` with ``dead-letter.topic`` to copy such records aside
    and go on.

    Attributes:
        topic, partition, offset: where the record is.
        table: the record's table (``db.table``), when known.
        reason: the underlying error's message.
    """

    def __init__(self, reason: str, *, topic: str, partition: int, offset: int, table: str | None = None) -> None:
        self.topic, self.partition, self.offset, self.table, self.reason = topic, partition, offset, table, reason
        where = f"topic {topic!r} partition {partition} offset {offset}"
        if table:
            where += f" (table {table})"
        super().__init__(f"bad record at {where}: {reason}")
