"""A ``changelake dev`` (webserver + daemon) on a free port against the test services, and a small
GraphQL client for assertions. Used by the browser and run-worker tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def write_pipelines(folder: Path, db: str, server_ids: str) -> None:
    """Pipeline 1 (MySQL ``db`` -> Kafka) and Pipeline 2 (Kafka -> Iceberg) for tables a and b."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "one.yaml").write_text(textwrap.dedent(f"""\
        pipeline: {{name: p1-{db}}}
        source: {{type: mysql, hostname: "${{MYSQL_HOST}}", port: "${{MYSQL_PORT}}", username: "${{MYSQL_USER}}",
                 password: "${{MYSQL_PASSWORD}}", tables: '{db}.\\.*', server-id: {server_ids}}}
        sink: {{type: kafka, properties.bootstrap.servers: "${{KAFKA_BOOTSTRAP_SERVERS}}",
               sink.delivery-guarantee: exactly-once, debezium-json.include-schema.enabled: true}}
        """))
    (folder / "two.yaml").write_text(textwrap.dedent(f"""\
        pipeline: {{name: p2-{db}}}
        source: {{type: kafka, properties.bootstrap.servers: "${{KAFKA_BOOTSTRAP_SERVERS}}", topic: '{db}.a;{db}.b',
                 value.format: debezium-json}}
        transform:
          - {{source-table: '{db}.\\.*', primary-keys: id}}
        sink: {{type: iceberg, catalog.properties.uri: "${{ICEBERG_CATALOG_URI}}",
               catalog.properties.warehouse: "${{ICEBERG_WAREHOUSE}}"}}
        """))


def service_env(tmp: Path, mysql_params: dict, kafka_bootstrap: str, pipelines: Path) -> dict[str, str]:
    """The environment of ``changelake dev`` and the CLI for a test (own state dir, own lake)."""
    (tmp / "wh").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env.update({
        "CHANGELAKE_STATE_DIR": str(tmp / "state"),
        "CHANGELAKE_PIPELINES_DIR": str(pipelines),
        "MYSQL_HOST": mysql_params["host"], "MYSQL_PORT": str(mysql_params["port"]),
        "MYSQL_USER": mysql_params["user"], "MYSQL_PASSWORD": mysql_params["password"],
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "ICEBERG_CATALOG_URI": f"sqlite:///{tmp / 'catalog.db'}",
        "ICEBERG_WAREHOUSE": f"file://{tmp / 'wh'}",
        "PYTHONWARNINGS": "ignore",
    })
    return env


def committed_records(bootstrap: str, topic: str) -> int:
    """How many records of ``topic`` (partition 0) a ``read_committed`` consumer reads now, from
    the beginning (0 while the topic does not exist)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{time.time()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 3})
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        except KafkaException:  # the topic does not exist yet
            return 0
        consumer.assign([TopicPartition(topic, 0, low)])
        count, pos, deadline = 0, low, time.monotonic() + 30
        while pos < high - 1 and time.monotonic() < deadline:
            messages = consumer.consume(500, timeout=1)
            if not messages:
                break  # the rest is uncommitted (or control records): not readable yet
            for m in messages:
                pos = max(pos, m.offset())
                if not m.error():
                    count += 1
        return count
    finally:
        consumer.close()


def wait_committed(bootstrap: str, counts: dict[str, int], timeout_s: float = 120.0) -> None:
    """Wait until each topic of ``counts`` holds at least that many committed records.

    Raises:
        TimeoutError: not within ``timeout_s`` seconds (names the topics and what they held).
    """
    deadline = time.monotonic() + timeout_s
    held: dict[str, int] = {}
    while time.monotonic() < deadline:
        held = {topic: committed_records(bootstrap, topic) for topic in counts}
        if all(held[t] >= n for t, n in counts.items()):
            return
        time.sleep(0.5)
    raise TimeoutError(f"committed records {held}, wanted at least {counts}, after {timeout_s} s")


class DagsterDev:
    """``changelake dev --port PORT`` in its own process group; ``stop()`` ends the group."""

    def __init__(self, env: dict[str, str], port: int, log: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self._out = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "dev", "--port", str(port)],
            cwd=REPO_ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dagster dev exited: {self.log.read_text()[-3000:]}")
            try:
                data = self.graphql("{ workspaceOrError { ... on Workspace { locationEntries { name "
                                    "locationOrLoadError { __typename } } } } }")
                entries = data["workspaceOrError"]["locationEntries"]
                if entries and entries[0]["locationOrLoadError"] and \
                        entries[0]["locationOrLoadError"]["__typename"] == "RepositoryLocation":
                    return
                if entries and entries[0]["locationOrLoadError"] and \
                        entries[0]["locationOrLoadError"]["__typename"] == "PythonError":
                    raise RuntimeError(f"code location failed to load: {self.log.read_text()[-3000:]}")
            except (OSError, KeyError, TypeError):
                pass
            time.sleep(1)
        raise TimeoutError(f"dagster dev not ready in {timeout_s} s: {self.log.read_text()[-3000:]}")

    def graphql(self, query: str, variables: dict | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                doc = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"GraphQL {exc.code}: {exc.read()[:2000]!r}") from exc
        if doc.get("errors"):
            raise RuntimeError(doc["errors"])
        return doc["data"]

    def runs(self, job: str | None = None) -> list[dict[str, Any]]:
        """Runs (newest first): runId, status, jobName, tags."""
        flt = {"pipelineName": job} if job else {}
        data = self.graphql(
            "query($f: RunsFilter) { runsOrError(filter: $f) { ... on Runs { results { runId status jobName "
            "tags { key value } } } } }", {"f": flt})
        return data["runsOrError"]["results"]

    def run_status(self, run_id: str) -> str:
        data = self.graphql("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": run_id})
        return data["runOrError"]["status"]

    def wait_status(self, run_id: str, statuses: set[str], timeout_s: float = 120.0) -> str:
        deadline = time.monotonic() + timeout_s
        status = ""
        while time.monotonic() < deadline:
            status = self.run_status(run_id)
            if status in statuses:
                return status
            time.sleep(1)
        raise TimeoutError(f"run {run_id} is {status}, not {statuses}, after {timeout_s} s")

    def run_logs(self, run_id: str) -> list[dict[str, Any]]:
        data = self.graphql(
            "query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events { __typename ... on MessageEvent { message eventType timestamp } "
            "... on ExecutionStepOutputEvent { metadataEntries { label ... on TextMetadataEntry { text } "
            "... on IntMetadataEntry { intValue } ... on FloatMetadataEntry { floatValue } } } "
            "... on ExecutionStepFailureEvent { error { message } } "
            "... on RunFailureEvent { error { message } } } } } }", {"id": run_id})
        return data["logsForRun"]["events"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._out.close()
