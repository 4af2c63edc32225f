"""DDL on a captured table the lock-free snapshot has not read yet, end to end (issue 17 class):
Pipeline 1's snapshot reads ``a`` then ``b``; right after its ``open()`` (every definition read, no
row yet) a row of ``b`` changes, ``b`` is altered or re-created, and rows of ``b`` change again.
Pipeline 1 (``hash-by-key``, 3 partitions) then Pipeline 2 run to the end; both lake tables equal
MySQL (Iceberg and Paimon, by the ``lake`` fixture)."""

from __future__ import annotations

from typing import Any

import pytest

from changelake.changelog import TableId
from changelake.connectors.mysql_cdc.snapshot import reader
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table
from test_ddl_and_transactions import HASH3

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("ddl", [
    # instant: the snapshot reads b with the new definition
    ["ALTER TABLE b DROP COLUMN s", "INSERT INTO b VALUES (1000, 1000)", "UPDATE b SET v = v + 1000 WHERE id = 2"],
    # the transaction cannot read the new b (ER_TABLE_DEF_CHANGED): a new consistent snapshot does
    ["DROP TABLE b", "CREATE TABLE b (id INT PRIMARY KEY, x VARCHAR(5))", "INSERT INTO b VALUES (1000, 'x'), (2, 'y')"],
], ids=["drop-column", "drop-create"])
def test_ddl_on_a_table_not_yet_snapshotted_reaches_the_lake_exactly(database_factory, mysql_exec, mysql_params,
                                                                     pipeline_pair, monkeypatch, ddl):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE a (id INT PRIMARY KEY, v INT)", "INSERT INTO a SELECT seq, seq FROM seq_1_to_500",
               "CREATE TABLE b (id INT PRIMARY KEY, v INT, s VARCHAR(10))",
               "INSERT INTO b SELECT seq, seq, CONCAT('s', seq) FROM seq_1_to_500")
    p1, p2 = pipeline_pair(db, ["a", "b"], p1_extra=HASH3)
    real_open = reader.SnapshotReader.open
    ran: list[bool] = []

    def open_then_ddl(self: reader.SnapshotReader) -> Any:
        at = real_open(self)
        if not ran:
            ran.append(True)
            mysql_exec(db, "UPDATE b SET v = v + 100 WHERE id = 1", *ddl)
        return at

    monkeypatch.setattr(reader.SnapshotReader, "open", open_then_ddl)
    run_pipeline(p1, until_caught_up=True)
    assert ran, "the DDL did not run during the snapshot"
    run_pipeline(p2, until_caught_up=True)
    for name in ("a", "b"):
        result = verify_lake_table(p2, TableId(db, name), mysql=mysql_params)
        assert result.passed, (name, str(result.metadata()))
    rows = {r["id"]: r for r in read_lake_table(p2, TableId(db, "b")).to_pylist()}
    if "DROP COLUMN" in ddl[0]:
        assert (rows[1]["v"], rows[2]["v"], rows[1000]["v"], len(rows)) == (101, 1002, 1000, 501)
    else:  # only the new table's rows
        assert {k: r["x"] for k, r in rows.items()} == {1000: "x", 2: "y"}
