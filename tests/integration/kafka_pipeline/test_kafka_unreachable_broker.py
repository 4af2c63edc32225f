"""Kafka clients pointed at a closed local port: one KafkaUnavailableError naming the address,
raised within the configured timeout, and librdkafka's connection failures as (throttled) Python
log records of ``changelake.kafka.client`` instead of lines on stderr.

Real librdkafka against a port nothing listens on (``changelake.services.free_port()``); no mocks.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time

import pytest

from changelake.connectors.errors import ConnectorError, KafkaUnavailableError
from changelake.connectors.kafka.sink import KafkaPipelineSink
from changelake.connectors.kafka.source import KafkaPipelineSource
from changelake.connectors.kafka_common import CLIENT_LOGGER_NAME, ensure_topics
from changelake.services import free_port

pytestmark = pytest.mark.integration

TIMEOUT_S = 2.0
#: what librdkafka needs beyond the timeout to return and the client to close
SLACK_S = 3.0


@pytest.fixture
def closed_bootstrap() -> str:
    return f"127.0.0.1:{free_port()}"


def _check(exc: KafkaUnavailableError, bootstrap: str, elapsed: float, caplog: pytest.LogCaptureFixture,
           capfd: pytest.CaptureFixture[str]) -> None:
    assert isinstance(exc, ConnectorError)
    assert str(exc).startswith(f"cannot reach Kafka at {bootstrap} within {TIMEOUT_S:g} s (")
    assert exc.bootstrap_servers == bootstrap
    assert elapsed < TIMEOUT_S + SLACK_S, elapsed
    refused = [r for r in caplog.records if r.name == CLIENT_LOGGER_NAME and "Connection refused" in r.getMessage()
               and bootstrap in r.getMessage()]
    assert refused, [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.ERROR for r in refused)
    # librdkafka retries many times a second; the filter lets the first line through
    assert len(refused) == 1, [r.getMessage() for r in refused]
    err = capfd.readouterr().err
    assert "Connection refused" not in err and "|FAIL|" not in err, err[:2000]


def test_pipeline_sink_open_fails_fast_naming_the_address_and_never_the_password(
    closed_bootstrap: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    sink = KafkaPipelineSink(
        {
            "properties.bootstrap.servers": closed_bootstrap,
            "properties.security.protocol": "SASL_PLAINTEXT",
            "properties.sasl.mechanism": "PLAIN",
            "properties.sasl.username": "alice",
            "properties.sasl.password": "S3CRET-PW",
            "sink.flush.timeout": f"{TIMEOUT_S:g}s",
        },
        pipeline_name="unreachable",
    )
    start = time.monotonic()
    with pytest.raises(KafkaUnavailableError) as err:
        sink.open()
    _check(err.value, closed_bootstrap, time.monotonic() - start, caplog, capfd)
    assert "S3CRET-PW" not in str(err.value)
    assert all("S3CRET-PW" not in r.getMessage() for r in caplog.records)
    sink.close()  # nothing opened: a no-op


def test_pipeline_sink_stored_position_fails_fast(
    closed_bootstrap: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    # no auto-create and at-least-once: open() needs no broker, stored_position() is the first call
    sink = KafkaPipelineSink(
        {"properties.bootstrap.servers": closed_bootstrap, "sink.topic.auto-create": "false",
         "sink.delivery-guarantee": "at-least-once"},
        pipeline_name="unreachable",
    )
    sink.open()
    try:
        start = time.monotonic()
        with pytest.raises(KafkaUnavailableError) as err:
            sink.stored_position(timeout_s=TIMEOUT_S)
        _check(err.value, closed_bootstrap, time.monotonic() - start, caplog, capfd)
    finally:
        sink.close()


def test_pipeline_source_open_fails_fast(
    closed_bootstrap: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    source = KafkaPipelineSource({"properties.bootstrap.servers": closed_bootstrap, "topic": "inventory"},
                                 group_id="unreachable", timeout_s=TIMEOUT_S)
    start = time.monotonic()
    with pytest.raises(KafkaUnavailableError) as err:
        source.open()
    _check(err.value, closed_bootstrap, time.monotonic() - start, caplog, capfd)


def test_topic_creation_fails_fast(
    closed_bootstrap: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    start = time.monotonic()
    with pytest.raises(KafkaUnavailableError) as err:
        ensure_topics(closed_bootstrap, ["t1"], timeout_s=TIMEOUT_S)
    _check(err.value, closed_bootstrap, time.monotonic() - start, caplog, capfd)


def test_reachable_broker_still_opens(kafka_bootstrap: str, topic_factory, capfd: pytest.CaptureFixture[str]) -> None:
    topic = topic_factory()
    sink = KafkaPipelineSink({"properties.bootstrap.servers": kafka_bootstrap, "sink.flush.timeout": "10s"},
                             pipeline_name=f"reachable-{topic}")
    with sink:
        assert sink.stored_position(timeout_s=10) is None
    source = KafkaPipelineSource({"properties.bootstrap.servers": kafka_bootstrap, "topic": topic},
                                 group_id=f"g-{topic}", timeout_s=10)
    source.open()
    try:
        assert source.caught_up()
    finally:
        source.close()
    assert "|FAIL|" not in capfd.readouterr().err


def test_cli_pipeline_run_prints_one_clear_error(tmp_path, closed_bootstrap: str) -> None:
    """The reported case: `changelake pipeline run` with nothing listening at the bootstrap address."""
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text(textwrap.dedent(f"""\
        pipeline:
          name: unreachable-kafka
        source:
          type: mysql
          hostname: ${{MYSQL_HOST}}
          port: ${{MYSQL_PORT}}
          username: ${{MYSQL_USER}}
          password: ${{MYSQL_PASSWORD}}
          tables: db.\\.*
          server-id: 7300
        sink:
          type: kafka
          properties.bootstrap.servers: ${{KAFKA_BOOTSTRAP_SERVERS}}
          properties.sasl.password: KAFKA-S3CRET
          properties.sasl.username: alice
          properties.sasl.mechanism: PLAIN
          properties.security.protocol: SASL_PLAINTEXT
          sink.flush.timeout: {TIMEOUT_S:g}s
        """))
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": closed_bootstrap, "DAGSTER_HOME": str(tmp_path / "dagster"),
           "CHANGELAKE_STATE_DIR": str(tmp_path / "state"),
           "ICEBERG_CATALOG_URI": f"sqlite:///{tmp_path / 'c.db'}", "ICEBERG_WAREHOUSE": f"file://{tmp_path}",
           # MySQL is never contacted: the sink opens (and fails) first
           "MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": str(free_port()), "MYSQL_USER": "nobody",
           "MYSQL_PASSWORD": "MYSQL-S3CRET"}
    done = subprocess.run([sys.executable, "-m", "cli", "pipeline", "run", str(yaml_file),
                           "--until-caught-up"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert f"cannot reach Kafka at {closed_bootstrap} within {TIMEOUT_S:g} s" in done.stderr, out[-3000:]
    assert "S3CRET" not in out
    # the error line and at most a few throttled client log lines, not hundreds
    assert len(out.splitlines()) <= 5, out[-3000:]
    assert "|FAIL|" not in out
