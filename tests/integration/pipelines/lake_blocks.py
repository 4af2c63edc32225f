"""Pipeline 2 sink blocks for the pipeline tests (imported by name: pytest puts this folder on
``sys.path`` for the test files and the conftest beside it)."""

from __future__ import annotations


def lake_sink(lake: str, tmp_path) -> dict:
    """Pipeline 2's sink block for ``lake`` on a catalog under ``tmp_path``."""
    if lake == "paimon":
        return {"type": "paimon", "catalog.properties.metastore": "filesystem",
                "catalog.properties.warehouse": str(tmp_path / "paimon"), "commit.user": "it",
                "table.properties.deletion-vectors.enabled": True}
    (tmp_path / "warehouse").mkdir(exist_ok=True)
    return {
        "type": "iceberg", "catalog.properties.type": "sql",
        "catalog.properties.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "catalog.properties.warehouse": f"file://{tmp_path / 'warehouse'}",
    }
