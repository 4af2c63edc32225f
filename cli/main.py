"""The ``changelake`` command line.

    changelake services up|down|status|env     local Kafka + MariaDB (see changelake.services)
        [--catalog postgres|rest]              ... and a shared lake catalog (scale-out)
    changelake pipeline run FILE.yaml [--until-caught-up]
    changelake changelog ...                   print a topic as a changelog (+I/-U/+U/-D)
    changelake demo                            the main job, end to end on the local services
    changelake check [--pipeline FILE]         every lake check, headless; exit 1 on failure
    changelake dev [--port P] [--host H]         the Dagster UI + daemon on the CLI's Dagster home
    changelake lake maintain FILE.yaml         compact, expire snapshots, remove orphan files
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from changelake.errors import ChangelakeError
from cli import changelog, check, demo, dev, lake, pipeline

__all__ = ["main"]


def _services(args: argparse.Namespace) -> int:
    from changelake.services import Services

    services = Services.local()
    if args.action == "up":
        services.up(catalogs=args.catalog or ())
        for name, state in services.status().items():
            print(f"{name}: {state}")
    elif args.action == "down":
        services.down()
        print("stopped")
    elif args.action == "status":
        status = services.status()
        for name, state in status.items():
            print(f"{name}: {state}")
        return 0 if all(s.startswith("up") for s in status.values()) else 1
    elif args.action == "env":
        for key, value in services.env().items():
            print(f"export {key}={shlex.quote(value)}")
    return 0


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="changelake", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    services = sub.add_parser("services", help="start/stop the local Kafka and MariaDB")
    services.add_argument("action", choices=["up", "down", "status", "env"])
    services.add_argument("--catalog", action="append", choices=["postgres", "rest"],
                          help="with up: also start this shared lake catalog (repeatable): PostgreSQL for "
                               "pyiceberg's SQL catalog, or Iceberg's REST catalog; `services env` prints their URIs")
    services.set_defaults(func=_services)

    for command in (pipeline, changelog, check, dev, lake, demo):
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``changelake`` script. Returns the process exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    import logging

    from changelake.connectors.kafka_common import CLIENT_LOGGER_NAME

    # librdkafka's notices (e.g. "GETPID ... Coordinator load in progress") are retried by the
    # client itself: keep them out of the command's output unless asked for.
    logging.getLogger(CLIENT_LOGGER_NAME).setLevel(os.environ.get("CHANGELAKE_KAFKA_LOG_LEVEL", "ERROR"))
    if args.command != "services":
        from cli._env import apply_local_service_env

        apply_local_service_env()  # the local services' values, where the user set none
    try:
        return int(args.func(args) or 0)
    except ChangelakeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
