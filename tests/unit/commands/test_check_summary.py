"""``changelake check``'s summary counts a WARN (a stale ``lake_is_fresh``) on its own: neither passed
nor failed, and it does not fail the command."""

from __future__ import annotations

import argparse

import cli.check as check


def _row(table: str, name: str, passed: bool, severity: str = "ERROR") -> dict:
    return {"table": table, "check": name, "passed": passed, "severity": severity, "metadata": {"lag": 3}}


def _run(monkeypatch, capsys, rows: list[dict], ok: bool) -> tuple[int, str]:
    monkeypatch.setattr(check, "run_checks", lambda pipeline: (ok, rows))
    code = check.run(argparse.Namespace(pipeline=None))
    return code, capsys.readouterr().out


def test_a_warning_is_counted_apart_from_passed_and_failed(monkeypatch, capsys):
    rows = [_row("db.a", "key_state_matches_mysql", True), _row("db.a", "lake_is_fresh", False, "WARN"),
            _row("db.b", "key_state_matches_mysql", False)]
    code, out = _run(monkeypatch, capsys, rows, ok=False)
    assert code == 1
    assert "lake checks passed: 1, failed: 1, warned: 1" in out, out
    assert any(line.startswith("db.a ") and "lake_is_fresh" in line and "WARN" in line for line in out.splitlines())


def test_only_warnings_exit_zero_and_pass_nothing(monkeypatch, capsys):
    code, out = _run(monkeypatch, capsys, [_row("db.a", "lake_is_fresh", False, "WARN")], ok=True)
    assert code == 0
    assert "lake checks passed: 0, failed: 0, warned: 1" in out, out


def test_the_next_step_counts_failed_and_warned_checks_apart(monkeypatch, capsys):
    step = {"next_step": "Run the pipelines until caught up"}
    rows = [{**_row("db.a", "lake_is_fresh", False, "WARN"), "metadata": step},
            {**_row("db.b", "lake_is_fresh", False, "WARN"), "metadata": step},
            {**_row("db.b", "key_state_matches_mysql", False), "metadata": step}]
    _, out = _run(monkeypatch, capsys, rows, ok=False)
    assert "next step (1 failed check(s), e.g. db.b key_state_matches_mysql; 2 warned): Run the pipelines" in out, out
    _, out = _run(monkeypatch, capsys, rows[:2], ok=True)
    assert "next step (2 warned check(s), e.g. db.a lake_is_fresh): Run the pipelines" in out, out
