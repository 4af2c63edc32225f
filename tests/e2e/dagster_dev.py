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
