"""Issue 17, the last DROP gaps at the source (real MariaDB): a DROP TABLE read by the binlog
reader carries the schema of a table the snapshot read even when the table was gone before the
reader started (its warm-up finds nothing in information_schema), and ``DROP TABLE IF EXISTS`` of a
captured name that never held a table gives no event at all (nothing of it is in Kafka). Before,
both DROPs had no schema, and with ``debezium-json.include-schema.enabled`` Pipeline 1 stopped
(end to end: tests/integration/pipelines/test_drop_with_schema.py)."""

from __future__ import annotations

import threading
import time

import pytest

from changelake.changelog.event import Op
from changelake.connectors.mysql_cdc import MySqlSource
from mysql_cdc_support import drain, run_sql, source_options

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mode", [{}, {"scan.incremental.snapshot.enabled": "true",
                                       "scan.incremental.snapshot.chunk.size": "200"}], ids=["lock-free", "incremental"])
def test_a_table_dropped_before_the_binlog_reader_starts_has_the_snapshot_schema(mysql_params, database_factory,
                                                                                 mode):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE a_gone (id INT PRIMARY KEY, v DECIMAL(6,2), w VARCHAR(7))",
            "INSERT INTO a_gone VALUES (1, 1.50, 'x'), (2, 2.25, 'y')",
            "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)", "INSERT INTO t SELECT seq, seq FROM seq_1_to_2000")
    src = MySqlSource(source_options(mysql_params, db, "a_gone|t|never_t",
                                     **{"scan.snapshot.fetch.size": "100", **mode}))
    src.open()
    events = []
    try:
        events += src.poll(150, 0.5)  # a_gone's rows (read first) and part of t's
        assert any(e.table.table == "a_gone" for e in events)
        assert src.position is None or src.position.get("phase") == "snapshot"
        # the DROP waits for the snapshot (lock-free: its transaction holds a_gone), then runs while
        # the binlog reader is being started: information_schema has no a_gone at the reader's start
        done, errors = threading.Event(), []

        def run_ddl() -> None:
            try:
                run_sql(mysql_params, db, "DROP TABLE a_gone", "DROP TABLE IF EXISTS never_t",
                        "INSERT INTO t VALUES (100001, 1)")
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                done.set()

        worker = threading.Thread(target=run_ddl, daemon=True)
        worker.start()
        deadline = time.monotonic() + 120
        while not (done.is_set() and src.caught_up()):
            events += src.poll(500, 0.3)
            assert time.monotonic() < deadline, "not caught up"
        events += drain(src)
        assert not errors, errors
    finally:
        src.close()
    snapshot = next(e for e in events if e.table.table == "a_gone" and e.op is Op.READ)
    drops = [e for e in events if e.is_drop]
    assert [str(e.table) for e in drops] == [f"{db}.a_gone"]  # never_t: no event
    assert drops[0].schema is not None, "the DROP of a table the snapshot read has no schema"
    assert drops[0].schema.names == snapshot.schema.names == ["id", "v", "w"]
    assert drops[0].schema.primary_key == snapshot.schema.primary_key
    assert [c.type for c in drops[0].schema.columns] == [c.type for c in snapshot.schema.columns]
    assert not [e for e in events if e.table.table == "never_t"]
    assert any(e.table.table == "t" and (e.after or {}).get("id") == 100001 for e in events)
