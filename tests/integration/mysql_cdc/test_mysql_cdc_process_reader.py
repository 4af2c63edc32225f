"""The binlog reader's child process against the real MariaDB: it stops on the SIGTERM of
``close()`` even when the process that starts it ignores SIGTERM.

Dagster maps SIGTERM to SIGINT's handler (``dagster._utils.interrupts``), and a shell's background
job ignores SIGINT, so a Dagster process started with ``&`` ignores SIGTERM. An ignored signal stays
ignored across exec: without its own default the child outlived every ``close()`` by the 10 s join
and was then killed with SIGKILL."""

from __future__ import annotations

import signal

import pytest

from changelake.connectors.mysql_cdc import MySqlSource
from changelake.connectors.mysql_cdc.binlog.reader import ProcessBinlogReader
from mysql_cdc_support import drain, run_sql, source_options

pytestmark = pytest.mark.integration


def test_the_reader_process_stops_on_sigterm_when_its_parent_ignores_sigterm(mysql_params, database_factory, monkeypatch):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    monkeypatch.setenv("CHANGELAKE_MYSQL_CDC_READER", "process")
    src = MySqlSource(source_options(mysql_params, db, "t"), None)
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        src.open()
        events = drain(src)  # the snapshot, then the binlog: the reader process starts here
        run_sql(mysql_params, db, "INSERT INTO t VALUES (2)")
        events += drain(src)
        reader = src._reader
        assert isinstance(reader, ProcessBinlogReader)
        proc = reader._proc
        assert proc is not None and proc.is_alive()
    finally:
        signal.signal(signal.SIGTERM, previous)
        src.close()
    assert sorted(e.after["id"] for e in events) == [1, 2]
    assert proc.exitcode == -signal.SIGTERM, f"the reader process ended with {proc.exitcode}, not by SIGTERM"
