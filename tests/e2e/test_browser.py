"""The Dagster UI in a real browser: ``changelake dev`` (webserver + daemon) on a free port against
the test services, driven through Debian's chromium (headless, Playwright, no browser download).

It sees the MySQL -> Kafka -> lake lineage with the checks; launches Pipeline 1 bounded from the
Launchpad; materializes one lake table and sees its checks pass; launches an unbounded run of
Pipeline 1, launches a second one and sees it held back in the queue; terminates the first and
sees a clean stop (no stack trace, final stats in the output). Screenshots go to
``tests/output/browser/`` (ignored by git).
"""

from __future__ import annotations

import os

import re
import shutil
import time
from pathlib import Path

import pymysql
import pytest

from changelake.services import free_port
from dagster_dev import DagsterDev, service_env, write_pipelines

pytestmark = [pytest.mark.integration, pytest.mark.browser]

OUTPUT = Path(__file__).resolve().parents[1] / "output" / "browser"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture
def dev(tmp_path, mysql_params, kafka_bootstrap, database_factory):
    db = database_factory()
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("CREATE TABLE b (id INT PRIMARY KEY, n INT)")
        cur.execute("INSERT INTO a VALUES (1,'x'),(2,'y'),(3,'z')")
        cur.execute("INSERT INTO b VALUES (1,10)")
    conn.close()
    write_pipelines(tmp_path / "pipelines", db, "7400-7410")
    env = service_env(tmp_path, mysql_params, kafka_bootstrap, tmp_path / "pipelines")
    server = DagsterDev(env, free_port(), tmp_path / "dagster-dev.log")
    try:
        server.wait_ready()
        yield db, server
    finally:
        server.stop()


@pytest.fixture
def page():
    if not Path(CHROMIUM).exists():
        message = "Debian's chromium is not installed (scripts/install-system-deps.sh installs it)"
        if os.environ.get("CI"):  # `make test` installs it: in CI a missing browser is a failure, not a skip
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.set_default_timeout(60_000)
        # The UI's one-time "Join the Dagster community" dialog shows up at a moment of its own
        # (later on a loaded machine): Playwright closes it whenever it covers an action.
        page.add_locator_handler(page.get_by_text("Join the Dagster community"),
                                 lambda: page.get_by_role("button", name="Skip").click())
        try:
            yield page
        finally:
            page.screenshot(path=str(OUTPUT / "zz-last.png"))
            browser.close()


def shot(page, name: str) -> None:
    page.screenshot(path=str(OUTPUT / f"{name}.png"))


def launch_from_launchpad(page, dev: DagsterDev, job: str, config_yaml: str) -> str:
    """Open the job's Launchpad, put ``config_yaml`` in the editor, click Launch; returns the run id."""
    page.goto(f"{dev.url}/locations/changelake/jobs/{job}/playground")
    page.wait_for_selector(".CodeMirror", state="visible")
    page.evaluate("(text) => document.querySelector('.CodeMirror').CodeMirror.setValue(text)", config_yaml)
    button = page.get_by_role("button", name=re.compile(r"Launch run", re.I))
    button.wait_for(state="visible")
    button.click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}"))
    return re.search(r"/runs/([0-9a-f-]{36})", page.url).group(1)


def test_lineage_launch_materialize_queue_and_clean_stop_in_the_browser(dev, page):
    db, server = dev
    job1, op1 = f"p1_{db}", f"run_p1_{db}"

    # 1. Lineage: mysql -> kafka -> lake with checks, seen in the asset graph.
    page.goto(f"{server.url}/asset-groups")
    page.get_by_text("sources", exact=False).first.wait_for()
    page.get_by_text("lake", exact=True).first.wait_for()
    time.sleep(2)
    shot(page, "01-lineage")
    nodes = server.graphql("{ assetNodes { assetKey { path } dependencyKeys { path } kinds "
                           "assetChecksOrError { ... on AssetChecks { checks { name } } } } }")["assetNodes"]
    by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes}
    assert [d["path"] for d in by_key[f"lake/p2_{db}/{db}/a"]["dependencyKeys"]] == [["kafka", db, "a"]]
    assert [d["path"] for d in by_key[f"kafka/{db}/a"]["dependencyKeys"]] == [["mysql", db, "a"]]
    assert "mysql" in by_key[f"mysql/{db}/a"]["kinds"]
    assert {c["name"] for c in by_key[f"lake/p2_{db}/{db}/a"]["assetChecksOrError"]["checks"]} == {
        "key_state_matches_mysql", "no_duplicate_primary_keys", "lake_is_fresh"}
    page.goto(f"{server.url}/assets/lake/p2_{db}/{db}/a?view=lineage&lineageScope=upstream")
    page.get_by_role("button", name="All").click()
    page.get_by_text("Mysql", exact=False).first.wait_for()
    time.sleep(3)
    shot(page, "02-lake-table-upstream-lineage")

    # 2. Pipeline 1, bounded, from the Launchpad.
    run1 = launch_from_launchpad(page, server, job1, f"ops:\n  {op1}:\n    config:\n      until_caught_up: true\n")
    assert server.wait_status(run1, {"SUCCESS", "FAILURE"}, timeout_s=180) == "SUCCESS"
    page.reload()
    page.get_by_text("Success").first.wait_for()
    shot(page, "03-pipeline-1-bounded-run")
    # A one-op job runs its step in the run's own process (no step subprocess to start); how long
    # that takes is the machine's business, not this test's.
    messages = [e.get("message") or "" for e in server.run_logs(run1)]
    assert any(m.startswith("Executing steps in process") for m in messages), messages
    assert not any("multiprocess executor" in m for m in messages), messages

    # 3. Materialize one lake table from its asset page; its checks pass.
    page.goto(f"{server.url}/assets/lake/p2_{db}/{db}/a")
    page.get_by_role("button", name=re.compile(r"Materialize$")).first.click()
    deadline = time.monotonic() + 180
    lake_run = None
    while time.monotonic() < deadline and lake_run is None:
        lake_run = next((r["runId"] for r in server.runs() if r["jobName"] == "__ASSET_JOB"), None)
        time.sleep(1)
    assert lake_run, "no materialization run was launched"
    assert server.wait_status(lake_run, {"SUCCESS", "FAILURE"}, timeout_s=180) == "SUCCESS"
    checks = server.graphql(
        "query($k: AssetKeyInput!) { assetNodeOrError(assetKey: $k) { ... on AssetNode { assetChecksOrError { "
        "... on AssetChecks { checks { name executionForLatestMaterialization { status } } } } } } }",
        {"k": {"path": ["lake", f"p2_{db}", db, "a"]}})["assetNodeOrError"]["assetChecksOrError"]["checks"]
    status = {c["name"]: (c["executionForLatestMaterialization"] or {}).get("status") for c in checks}
    assert status["key_state_matches_mysql"] == "SUCCEEDED", status
    assert status["no_duplicate_primary_keys"] == "SUCCEEDED", status
    page.goto(f"{server.url}/assets/lake/p2_{db}/{db}/a?view=checks")
    page.get_by_text("key_state_matches_mysql").first.wait_for()
    page.get_by_text("Passed", exact=True).first.wait_for()
    time.sleep(2)
    shot(page, "04-lake-table-checks-passed")
    materialized = {r["jobName"] for r in server.runs()}
    assert f"p2_{db}" not in materialized  # table b was not touched: only a was selected

    # 4. An unbounded run, then a second launch: held back in the queue while the first runs.
    unbounded = f"ops:\n  {op1}:\n    config:\n      until_caught_up: false\n"
    first = launch_from_launchpad(page, server, job1, unbounded)
    server.wait_status(first, {"STARTED"}, timeout_s=120)
    second = launch_from_launchpad(page, server, job1, unbounded)
    time.sleep(8)  # several dequeue intervals
    assert server.run_status(second) == "QUEUED"
    assert server.run_status(first) == "STARTED"
    page.goto(f"{server.url}/runs")
    page.get_by_text("Queued").first.wait_for()
    shot(page, "05-second-run-held-back")
    # The queued run names the run it waits for (sensor queued_runs_name_their_blocker), as the CLI does.
    deadline, waiting = time.monotonic() + 120, None
    while time.monotonic() < deadline and not waiting:
        tags = server.graphql("query($id: ID!) { runOrError(runId: $id) { ... on Run { tags { key value } } } }",
                              {"id": second})["runOrError"]["tags"]
        waiting = next((t["value"] for t in tags if t["key"] == "changelake/waiting_for"), None)
        time.sleep(2)
    assert waiting and waiting.startswith(first), waiting
    assert any(f"is already running: run {first}" in (e.get("message") or "") for e in server.run_logs(second))
    # A queued run's page shows no log; its tags (View tags and config) name the blocker.
    page.goto(f"{server.url}/runs/{second}")
    page.get_by_role("button", name=re.compile("View tags and config")).first.click()
    page.get_by_text(f"{first} (STARTED)").first.wait_for()
    time.sleep(1)  # the dialog's fade-in
    shot(page, "05b-queued-run-names-its-blocker")
    page.keyboard.press("Escape")

    # 5. Terminate the first: a clean stop with final stats; the queued one starts after it.
    page.goto(f"{server.url}/runs/{first}")
    page.get_by_role("button", name=re.compile(r"Terminate$")).first.click()
    dialog_button = page.get_by_role("dialog").get_by_role("button", name=re.compile(r"Terminate"))
    if dialog_button.count():
        dialog_button.first.click()
    final = server.wait_status(first, {"CANCELED", "SUCCESS", "FAILURE"}, timeout_s=120)
    assert final in {"CANCELED", "SUCCESS"}, final
    page.reload()
    page.get_by_text("stop requested").first.wait_for()
    shot(page, "06-first-run-stopped-cleanly")
    events = server.run_logs(first)
    kinds = {e["__typename"] for e in events}
    assert "ExecutionStepFailureEvent" not in kinds and "RunFailureEvent" not in kinds, kinds
    assert not any("DagsterExecutionInterruptedError" in (e.get("message") or "") for e in events)
    (output,) = [e for e in events if e["__typename"] == "ExecutionStepOutputEvent"]
    md = {m["label"]: m.get("text", m.get("intValue", m.get("floatValue"))) for m in output["metadataEntries"]}
    assert {"events", "batches", "position", "offsets", "elapsed_s"} <= set(md), md
    assert md["stopped_because"] == "stop requested"
    # The second one was only held back: it starts now that the first has stopped.
    server.wait_status(second, {"STARTED"}, timeout_s=120)
    server.graphql("mutation($id: String!) { terminateRun(runId: $id) { __typename } }", {"id": second})
    server.wait_status(second, {"CANCELED", "SUCCESS", "FAILURE"}, timeout_s=120)
