"""The ``paimon`` pipeline sink: changelog batches into Apache Paimon primary-key tables via
pypaimon, exactly once (as Flink CDC's Paimon pipeline sink, the seed's Pipeline 2).

Public API: :func:`create_sink` (the factory: validates raw options, builds the sink),
:class:`PaimonSink`, :func:`parse_sink_options` / :class:`PaimonSinkOptions`, :func:`read_table`.
"""

from __future__ import annotations

from typing import Any, Mapping

from changelake.connectors.paimon.errors import (
    NullPrimaryKeyError,
    PaimonCommitError,
    PaimonSinkError,
    PaimonTypeError,
    SchemaEvolutionError,
)
from changelake.connectors.paimon.options import IDENTIFIER, ROW_KIND_FIELD, PaimonSinkOptions, parse_sink_options
from changelake.connectors.paimon.reader import read_table
from changelake.connectors.paimon.catalog import open_catalog
from changelake.connectors.paimon.writer import PaimonSink, WriteResult

__all__ = [
    "IDENTIFIER",
    "ROW_KIND_FIELD",
    "create_sink",
    "PaimonSink",
    "PaimonSinkOptions",
    "parse_sink_options",
    "WriteResult",
    "open_catalog",
    "read_table",
    "PaimonSinkError",
    "PaimonTypeError",
    "PaimonCommitError",
    "NullPrimaryKeyError",
    "SchemaEvolutionError",
]


def create_sink(raw: Mapping[str, Any]) -> PaimonSink:
    """The factory of sink ``type: paimon``: validate raw (YAML) options, build the sink (no I/O).

    Raises:
        OptionValidationError: see :func:`parse_sink_options`.
    """
    return PaimonSink(parse_sink_options(raw))
