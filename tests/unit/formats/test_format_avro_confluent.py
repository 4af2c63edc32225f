"""The ``avro-confluent`` format: Confluent's wire format and the registry client.

No Confluent-compatible registry can run here without extra services, so the client is tested
against a tiny in-test HTTP server implementing the two endpoints it uses
(``POST /subjects/{subject}/versions``, ``GET /schemas/ids/{id}``), and the wire format against
recorded golden bytes.
"""

from __future__ import annotations

import base64
import json
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from format_samples import ALL_TYPES, ROW_A, assert_same_values

from changelake.changelog import ChangelogRow, DataType, RowKind, Schema
from changelake.formats import create_format
from changelake.formats.avro import avro_schema_for
from changelake.formats.avro_confluent import AvroConfluentFormat, split_wire, wire_header
from changelake.formats.errors import DecodeError, FormatOptionError, SchemaRegistryError
from changelake.formats.schema_registry import SchemaRegistryClient, redact_url

SMALL = Schema.of([("id", DataType.of("INT", nullable=False)), ("price", DataType.decimal(10, 2))])


class FakeRegistry:
    """The two Confluent Schema Registry endpoints, in memory, optionally behind basic auth."""

    def __init__(self, user_info: str | None = None, first_id: int = 7) -> None:
        self.user_info = user_info
        self.schemas: dict[int, str] = {}
        self.subjects: dict[str, list[int]] = {}
        self.calls: list[tuple[str, str]] = []
        self.next_id = first_id
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _authorized(self) -> bool:
                if registry.user_info is None:
                    return True
                want = "Basic " + base64.b64encode(registry.user_info.encode()).decode()
                if self.headers.get("Authorization") == want:
                    return True
                self._reply(401, {"error_code": 401, "message": "Unauthorized"})
                return False

            def _reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                registry.calls.append(("POST", self.path))
                if not self._authorized():
                    return
                parts = self.path.strip("/").split("/")
                if len(parts) != 3 or parts[0] != "subjects" or parts[2] != "versions":
                    return self._reply(404, {"error_code": 404, "message": "not found"})
                text = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["schema"]
                json.loads(text)  # must be valid schema JSON
                for schema_id, known in registry.schemas.items():
                    if known == text:
                        break
                else:
                    schema_id = registry.next_id
                    registry.next_id += 1
                    registry.schemas[schema_id] = text
                registry.subjects.setdefault(parts[1], []).append(schema_id)
                self._reply(200, {"id": schema_id})

            def do_GET(self) -> None:  # noqa: N802
                registry.calls.append(("GET", self.path))
                if not self._authorized():
                    return
                parts = self.path.strip("/").split("/")
                if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and int(parts[2]) in registry.schemas:
                    return self._reply(200, {"schema": registry.schemas[int(parts[2])]})
                self._reply(404, {"error_code": 40403, "message": "Schema not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=lambda: self.server.serve_forever(poll_interval=0.05), daemon=True)

    def __enter__(self) -> "FakeRegistry":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def registry():
    with FakeRegistry() as reg:
        yield reg


def test_wire_format_golden_bytes():
    assert wire_header(7) == b"\x00\x00\x00\x00\x07"
    assert wire_header(0x01020304) == b"\x00\x01\x02\x03\x04"
    assert split_wire(b"\x00\x00\x00\x01\x00\x02\x04") == (256, b"\x02\x04")
    with pytest.raises(DecodeError, match="Unknown magic byte! \\(got 1, expected 0\\)"):
        split_wire(b"\x01\x00\x00\x00\x07\x02")
    with pytest.raises(DecodeError, match="shorter than the 5-byte header"):
        split_wire(b"\x00\x00")


@pytest.mark.parametrize("kind", list(RowKind))
def test_round_trip_through_the_registry(registry, kind):
    fmt = create_format("avro-confluent", SMALL, {"url": registry.url, "subject": "orders-value"})
    data = fmt.encode(ChangelogRow(kind, {"id": 1, "price": Decimal("12.34")}))
    # recorded golden bytes: header with the registry's id 7, then the Avro body of test_format_avro
    assert data == b"\x00\x00\x00\x00\x07" + b"\x02\x02\x04\x04\xd2"
    assert json.loads(registry.schemas[7]) == avro_schema_for(SMALL)
    # a fresh reader fetches the writer schema by id
    reader = create_format("avro-confluent", SMALL, {"url": registry.url})
    assert reader.decode(data) == [ChangelogRow(RowKind.INSERT, {"id": 1, "price": Decimal("12.34")})]


def test_registry_calls_are_cached(registry):
    fmt = create_format("avro-confluent", ALL_TYPES.project(["id", "price", "s", "ltz"]), {"url": registry.url, "subject": "t-value"})
    datas = [fmt.encode(ChangelogRow.insert(ROW_A)) for _ in range(3)]
    reader = create_format("avro-confluent", ALL_TYPES.project(["id", "price", "s", "ltz"]), {"url": registry.url})
    for data in datas:
        [row] = reader.decode(data)
        assert_same_values(ALL_TYPES.project(["id", "price", "s", "ltz"]), row.values, {k: ROW_A[k] for k in ("id", "price", "s", "ltz")})
    assert registry.calls == [("POST", "/subjects/t-value/versions"), ("GET", "/schemas/ids/7")]


def test_older_writer_schema_is_resolved(registry):
    old = create_format("avro-confluent", SMALL, {"url": registry.url, "subject": "s"})
    data = old.encode(ChangelogRow.insert({"id": 5, "price": None}))
    newer = Schema.of([*[(c.name, c.type) for c in SMALL.columns], ("note", DataType.of("STRING"))])
    reader = create_format("avro-confluent", newer, {"url": registry.url})
    assert reader.decode(data)[0].values == {"id": 5, "price": None, "note": None}


def test_schema_less_decoding_uses_the_writer_schema(registry):
    data = create_format("avro-confluent", SMALL, {"url": registry.url, "subject": "s"}).encode(
        ChangelogRow.insert({"id": 3, "price": Decimal("-0.50")})
    )
    assert create_format("avro-confluent", None, {"url": registry.url}).decode(data)[0].values == {
        "id": 3,
        "price": Decimal("-0.50"),
    }


def test_basic_auth_and_secret_never_shown():
    secret = "alice:s3cr3t-pw"
    with FakeRegistry(user_info=secret) as reg:
        ok = create_format("avro-confluent", SMALL, {"url": reg.url, "subject": "s", "basic-auth.user-info": secret})
        assert ok.encode(ChangelogRow.insert({"id": 1}))[:5] == b"\x00\x00\x00\x00\x07"
        bad = create_format("avro-confluent", SMALL, {"url": reg.url, "subject": "s", "basic-auth.user-info": "alice:wrong-pw"})
        with pytest.raises(SchemaRegistryError) as err:
            bad.encode(ChangelogRow.insert({"id": 1}))
        assert err.value.status == 401 and err.value.subject == "s"
        assert "wrong-pw" not in str(err.value) and "Unauthorized" in str(err.value)
        assert secret not in repr(ok) and secret not in repr(ok.options)
        # credentials in the URL itself are used but never shown either
        in_url = reg.url.replace("http://", "http://alice:s3cr3t-pw@")
        fmt = create_format("avro-confluent", SMALL, {"url": in_url, "subject": "s"})
        assert fmt.encode(ChangelogRow.insert({"id": 2}))[:5] == b"\x00\x00\x00\x00\x07"
        assert "s3cr3t" not in repr(fmt) and "s3cr3t" not in repr(fmt.registry)
    assert redact_url("http://u:p@host:8081/x") == "http://host:8081/x"


def test_unknown_schema_id_and_unreachable_registry(registry):
    reader = create_format("avro-confluent", SMALL, {"url": registry.url})
    with pytest.raises(SchemaRegistryError) as err:
        reader.decode(b"\x00\x00\x00\x00\x63\x02")
    assert err.value.schema_id == 99 and err.value.status == 404 and "Schema not found" in str(err.value)
    client = SchemaRegistryClient("http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(SchemaRegistryError) as err2:
        client.get_schema(1)
    assert err2.value.status is None and "GET /schemas/ids/1 failed" in str(err2.value)


def test_option_errors():
    with pytest.raises(FormatOptionError, match="Missing required options are: url"):
        create_format("avro-confluent", SMALL, {"subject": "s"})
    with pytest.raises(FormatOptionError, match="must be an http\\(s\\) URL"):
        create_format("avro-confluent", SMALL, {"url": "localhost:8081"})
    fmt = create_format("avro-confluent", SMALL, {"url": "http://127.0.0.1:9"})
    with pytest.raises(FormatOptionError, match="Option 'subject' is required for serialization"):
        fmt.encode(ChangelogRow.insert({"id": 1}))
