"""``python -m changelake.pageviews generate|run ...`` (used by the kill -9 tests, the benchmark and
by hand); prints JSON stats."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Sequence

from changelake.pageviews import __doc__ as _PACKAGE_DOC
from changelake.pageviews.data import generate_pageviews, produce_pageviews
from changelake.pageviews.job import run_pageviews_aggregation
from changelake.pageviews.query import pageviews_sink_options, retract_sink_options


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m changelake.pageviews generate|run ...``; prints JSON stats."""
    ap = argparse.ArgumentParser(prog="python -m changelake.pageviews", description=(_PACKAGE_DOC or "").splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="write N seeded page-view events to a topic")
    g.add_argument("--bootstrap", required=True)
    g.add_argument("--topic", default="pageviews")
    g.add_argument("-n", type=int, default=10000)
    g.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("run", help="aggregate PV/UV per region into an upsert-kafka topic")
    r.add_argument("--bootstrap", required=True)
    r.add_argument("--source-topic", default="pageviews")
    r.add_argument("--sink-topic", default="pageviews_per_region")
    r.add_argument("--format", default="avro", help="key and value format of the upsert topic")
    r.add_argument("--delivery-guarantee", default="at-least-once", choices=["none", "at-least-once", "exactly-once"])
    r.add_argument("--transactional-id-prefix", default=None)
    r.add_argument("--group-id", default=None)
    r.add_argument("--state-dir", default=None)
    r.add_argument("--retract-topic", default=None, help="also write the retract changelog here (debezium-json)")
    r.add_argument("--batch-size", type=int, default=2000)
    r.add_argument("--no-mini-batch", action="store_true")
    r.add_argument("--unbounded", action="store_true", help="do not stop when caught up")
    r.add_argument("--max-duration-s", type=float, default=None)
    args = ap.parse_args(argv)
    if args.cmd == "generate":
        n = produce_pageviews(args.bootstrap, args.topic, generate_pageviews(args.n, args.seed))
        print(json.dumps({"events": n, "topic": args.topic}))
        return 0
    prefix = args.transactional_id_prefix or (f"pageviews-agg-{args.sink_topic}" if args.delivery_guarantee == "exactly-once" else None)
    stats = run_pageviews_aggregation(
        args.bootstrap,
        args.source_topic,
        pageviews_sink_options(args.bootstrap, args.sink_topic, fmt=args.format, transactional_id_prefix=prefix),
        args.delivery_guarantee,
        args.state_dir,
        until_caught_up=not args.unbounded,
        group_id=args.group_id,
        retract_table_options=retract_sink_options(args.bootstrap, args.retract_topic) if args.retract_topic else None,
        batch_size=args.batch_size,
        mini_batch=not args.no_mini_batch,
        max_duration_s=args.max_duration_s,
    )
    print(json.dumps(asdict(stats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
