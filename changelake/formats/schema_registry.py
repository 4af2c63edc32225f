"""A small Confluent Schema Registry client over :mod:`urllib` (register and fetch Avro schemas).

Only the two calls the ``avro-confluent`` format needs, as Confluent's REST API defines them:

* ``POST {url}/subjects/{subject}/versions`` with ``{"schema": "<schema JSON text>"}`` -> ``{"id": N}``
  (registers the schema, or returns the id of the identical schema already registered);
* ``GET {url}/schemas/ids/{id}`` -> ``{"schema": "<schema JSON text>"}``.

Results are cached per client (subject + schema text -> id; id -> schema), so each schema costs one
call per process. No connection is opened before the first call.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from changelake.formats.errors import SchemaRegistryError

__all__ = ["SchemaRegistryClient", "redact_url"]

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def redact_url(url: str) -> str:
    """The URL without any ``user:password@`` part (for messages and repr)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


class SchemaRegistryClient:
    """Register and fetch Avro schemas in a Confluent-compatible schema registry.

    Args:
        url: registry base URL, e.g. ``http://127.0.0.1:8081``.
        user_info: ``user:password`` for HTTP basic auth (Flink's ``basic-auth.user-info``); a
            secret, never shown in errors or ``repr``.
        bearer_token: token for ``Authorization: Bearer`` (Flink's ``bearer-auth.token``); secret.
        timeout_s: per-request timeout in seconds. Default 10.

    Raises (from the calls): SchemaRegistryError with the URL (credentials removed), subject or
    schema id and the HTTP status.
    """

    def __init__(
        self, url: str, *, user_info: str | None = None, bearer_token: str | None = None, timeout_s: float = 10.0
    ) -> None:
        self.url = url.rstrip("/")
        self._user_info = user_info
        self._bearer = bearer_token
        self.timeout_s = timeout_s
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SchemaRegistryClient(url={redact_url(self.url)!r})"

    def _request(self, method: str, path: str, body: Any = None, *, subject: str | None = None, schema_id: int | None = None) -> Any:
        safe_url = redact_url(self.url)
        parts = urllib.parse.urlsplit(self.url)
        headers = {"Accept": _CONTENT_TYPE, "Content-Type": _CONTENT_TYPE}
        user_info = self._user_info
        if user_info is None and parts.username is not None:
            user_info = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        if user_info is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(user_info.encode("utf-8")).decode("ascii")
        elif self._bearer is not None:
            headers["Authorization"] = f"Bearer {self._bearer}"
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(safe_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            try:
                detail = json.loads(exc.read()).get("message", "")
            except Exception:  # the error body is optional and may not be JSON
                detail = ""
            raise SchemaRegistryError(
                f"{method} {path} was refused{': ' + detail if detail else ''}",
                url=safe_url,
                subject=subject,
                schema_id=schema_id,
                status=exc.code,
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SchemaRegistryError(
                f"{method} {path} failed: {reason}", url=safe_url, subject=subject, schema_id=schema_id
            ) from None

    def register(self, subject: str, schema: Any) -> int:
        """Register ``schema`` (an Avro schema as a JSON-able object) under ``subject``; its id.

        Cached: the same (subject, schema) is registered once per client.
        """
        text = json.dumps(schema, separators=(",", ":"), sort_keys=False)
        key = (subject, text)
        with self._lock:
            if key in self._ids:
                return self._ids[key]
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
        answer = self._request("POST", path, {"schema": text}, subject=subject)
        schema_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(schema_id, int):
            raise SchemaRegistryError(f"answer has no integer 'id': {answer!r}", url=redact_url(self.url), subject=subject)
        with self._lock:
            self._ids[key] = schema_id
            self._schemas.setdefault(schema_id, schema)
        return schema_id

    def get_schema(self, schema_id: int) -> Any:
        """The Avro schema (parsed JSON) registered under ``schema_id``. Cached."""
        with self._lock:
            if schema_id in self._schemas:
                return self._schemas[schema_id]
        answer = self._request("GET", f"/schemas/ids/{schema_id}", schema_id=schema_id)
        text = answer.get("schema") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise SchemaRegistryError(
                f"answer has no 'schema' text: {answer!r}", url=redact_url(self.url), schema_id=schema_id
            )
        schema = json.loads(text)
        with self._lock:
            self._schemas[schema_id] = schema
        return schema
