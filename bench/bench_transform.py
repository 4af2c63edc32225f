"""Transform expressions: changelake's evaluator (sqlglot + pyarrow.compute) against DuckDB on the same batch.

Evaluates one Flink CDC projection and filter over N rows of ``(id INT, name STRING, price
DECIMAL(10,2), qty INT)``:

- ``changelake batch``: ``TransformRule.apply_batch`` on one Arrow table (the columnar path);
- ``changelake events``: ``TransformRule.apply_events`` on N change events (the row path Stage uses);
- ``duckdb``: the same expressions as DuckDB SQL over the same Arrow table (its vectorised engine),
  the peer; DuckDB's NULL and division semantics differ from Flink's, the values are compared only
  where they agree (here: every row, no NULLs, no division).

Prints rows/s of each and the ratio to DuckDB. Usage:
``.venv/bin/python bench/bench_transform.py [--rows 200000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import random
import time
from decimal import Decimal

import duckdb
import pyarrow as pa

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.transform import TransformRule
from changelake.changelog.types import DataType, TypeRoot

PROJECTION = "id, UPPER(name) AS up, price * qty AS total, CONCAT(name, '-', CAST(qty AS VARCHAR)) AS label, " \
             "CHAR_LENGTH(name) AS n, CASE WHEN qty >= 5 THEN 'bulk' ELSE 'single' END AS size"
FILTER = "qty >= 5 OR name LIKE 'a%'"
DUCKDB_SQL = ("SELECT id, UPPER(name) AS up, CAST(price * qty AS DECIMAL(18, 2)) AS total, "
              "CONCAT(name, '-', CAST(qty AS VARCHAR)) AS label, LENGTH(name) AS n, "
              "CASE WHEN qty >= 5 THEN 'bulk' ELSE 'single' END AS size FROM batch "
              "WHERE qty >= 5 OR name LIKE 'a%'")
SCHEMA = Schema.of([("id", DataType(TypeRoot.INT, nullable=False)), ("name", DataType(TypeRoot.STRING)),
                    ("price", DataType.decimal(10, 2)), ("qty", DataType(TypeRoot.INT))], ["id"])
T = TableId("bench", "orders")


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rnd = random.Random(7)
    rows = [{"id": i, "name": rnd.choice(["alice", "bob", "carl", "anna"]) + str(i % 97),
             "price": Decimal(rnd.randint(1, 99999)) / 100, "qty": rnd.randint(1, 9)} for i in range(args.rows)]
    batch = pa.table({"id": pa.array([r["id"] for r in rows], pa.int32()), "name": [r["name"] for r in rows],
                      "price": pa.array([r["price"] for r in rows], pa.decimal128(10, 2)),
                      "qty": pa.array([r["qty"] for r in rows], pa.int32())})
    events = [DataChangeEvent(T, Op.CREATE, None, r, SCHEMA) for r in rows]
    rule = TransformRule(r"\.*.\.*", projection=PROJECTION, filter=FILTER)
    kinds = ["+I"] * args.rows
    con = duckdb.connect()
    con.register("batch", batch)

    ours = best(lambda: rule.apply_batch(T, SCHEMA, batch, kinds), args.repeat)
    per_event = best(lambda: rule.apply_events(events), args.repeat)
    peer = best(lambda: con.sql(DUCKDB_SQL).to_arrow_table(), args.repeat)

    got = rule.apply_batch(T, SCHEMA, batch, kinds).table
    want = con.sql(DUCKDB_SQL).to_arrow_table()
    same = (got.column("up").to_pylist() == want.column("up").to_pylist()
            and got.column("label").to_pylist() == want.column("label").to_pylist()
            and [Decimal(x) for x in got.column("total").to_pylist()] == want.column("total").to_pylist())
    print(f"rows {args.rows}, kept {got.num_rows}, values equal to DuckDB: {same}")
    print(f"{'path':<20}{'rows/s':>14}{'vs duckdb':>12}")
    for name, secs in (("changelake batch", ours), ("changelake events", per_event), ("duckdb", peer)):
        print(f"{name:<20}{args.rows / secs:>14,.0f}{peer / secs:>11.2f}x")


if __name__ == "__main__":
    main()
