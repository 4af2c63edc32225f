"""``changelake dev [--port P] [--host H]``: the Dagster UI and daemon (``dagster dev``) on the
Dagster home the CLI uses (``$DAGSTER_HOME``, else ``$CHANGELAKE_STATE_DIR/dagster``), with the
instance config that allows one run per pipeline. ``make dev PORT=3001 HOST=0.0.0.0`` runs it.

Ctrl-C (SIGINT) and SIGTERM stop it cleanly, also when it was started in the background: a shell
starts background jobs with SIGINT ignored, and ``dagster dev`` maps SIGTERM to its SIGINT
handler, so it would ignore both; the command restores the default SIGINT disposition first.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

__all__ = ["register", "run", "dev_command"]

REPO_ROOT = Path(__file__).resolve().parents[1]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("dev", help="the Dagster UI + daemon (dagster dev) on changelake's Dagster home")
    p.add_argument("--port", type=int, default=3000, help="port of the UI (default 3000; make dev PORT=...)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; 0.0.0.0 for every interface; make dev HOST=...)")
    p.set_defaults(func=run)


def dev_command(port: int, host: str) -> list[str]:
    """The ``dagster dev`` command line (run from the repository root)."""
    return [sys.executable, "-m", "dagster", "dev", "-w", str(REPO_ROOT / "workspace.yaml"), "-p", str(port), "-h", host]


def run(args: argparse.Namespace) -> int:
    print(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']}", flush=True)
    os.chdir(REPO_ROOT)
    cmd = dev_command(args.port, args.host)
    # An inherited "ignore SIGINT" survives exec (and dagster dev copies it to SIGTERM): restore
    # the defaults so that Ctrl-C and SIGTERM stop the UI and daemon.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.execv(cmd[0], cmd)
    return 0  # pragma: no cover - exec does not return
