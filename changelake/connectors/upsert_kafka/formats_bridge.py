"""The upsert-kafka connector's view of :mod:`changelake.formats` (lookup, insert-only check,
supported options, construction), in one place so the connector depends on four calls only."""

from __future__ import annotations

from typing import Any, Mapping

from changelake.changelog.rowkind import INSERT_ONLY
from changelake.changelog.schema import Schema

__all__ = ["format_names", "is_known_format", "is_insert_only", "supported_format_options", "create_format"]


def _registry() -> Mapping[str, Any]:
    import changelake.formats as formats

    return getattr(formats, "FORMATS", {})


def format_names() -> list[str]:
    """Identifiers of every registered format, sorted."""
    return sorted(_registry())


def is_known_format(name: str) -> bool:
    """True when ``name`` is a registered format identifier."""
    return name in _registry()


def is_insert_only(name: str) -> bool:
    """True when the format only carries plain rows (json, csv, avro, raw, ...), as Flink's
    ``ChangelogMode.insertOnly()`` check in UpsertKafkaDynamicTableFactory."""
    import changelake.formats as formats

    fn = getattr(formats, "is_insert_only", None)
    if fn is not None:
        return bool(fn(name))
    cls = _registry().get(name)
    return cls is not None and frozenset(getattr(cls, "changelog_mode", INSERT_ONLY)) == INSERT_ONLY


def supported_format_options(name: str) -> set[str]:
    """Option keys (without prefix) the format accepts; empty if it declares none."""
    cls = _registry().get(name)
    fn = getattr(cls, "supported_options", None)
    return set(fn()) if fn is not None else set()


def create_format(name: str, schema: Schema, options: Mapping[str, str]) -> Any:
    """Build a format instance (``encode(row) -> bytes | None``, ``decode(bytes) -> [rows]``).

    ``options`` are the format's own options with the ``key.<fmt>.`` / ``value.<fmt>.`` prefix
    stripped. Raises the formats layer's errors (FormatOptionError, FormatSchemaError).
    """
    import changelake.formats as formats

    return formats.create_format(name, schema, dict(options))
