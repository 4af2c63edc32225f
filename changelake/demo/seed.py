"""The demo's MySQL input: the seed's ``kafka_test`` database and a sysbench OLTP workload.

``kafka_test.customers (id, name, address, phone_number, age)`` and
``kafka_test.products (id, name, description, weight)`` get a few thousand deterministic rows
(row 4 is the seed's ``4, John, New York, 2222, 12``). The ``sbtest`` database is written by
Debian's ``sysbench`` (``oltp_write_only``), a real OLTP workload from a tool nobody here wrote.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
from typing import Any, Mapping

import pymysql

__all__ = ["MySqlParams", "connect", "load_kafka_test", "update_seed_customer", "run_sysbench"]

MySqlParams = Mapping[str, Any]  # host, port, user, password

CUSTOMERS_DDL = (
    "CREATE TABLE IF NOT EXISTS `kafka_test`.`customers` ("
    " `id` INT NOT NULL PRIMARY KEY, `name` VARCHAR(255) NOT NULL, `address` VARCHAR(1024),"
    " `phone_number` VARCHAR(512), `age` INT)"
)
PRODUCTS_DDL = (
    "CREATE TABLE IF NOT EXISTS `kafka_test`.`products` ("
    " `id` INT NOT NULL PRIMARY KEY, `name` VARCHAR(255) NOT NULL, `description` VARCHAR(512),"
    " `weight` DECIMAL(10,3))"
)
_FIRST = ["John", "Mary", "Wei", "Ana", "Omar", "Yuki", "Lars", "Priya", "Kofi", "Elena"]
_CITIES = ["New York", "Lisbon", "Hangzhou", "Nairobi", "Oslo", "São Paulo", "Kyoto", "Berlin"]


def connect(params: MySqlParams, database: str | None = None) -> pymysql.connections.Connection:
    """A utf8mb4 autocommit connection with session time zone UTC."""
    return pymysql.connect(
        host=params["host"], port=int(params["port"]), user=params["user"], password=params["password"],
        database=database, charset="utf8mb4", autocommit=True, init_command="SET time_zone='+00:00'",
    )


def load_kafka_test(params: MySqlParams, customers: int = 3000, products: int = 1000, seed: int = 7) -> dict[str, int]:
    """Create ``kafka_test`` and load rows (idempotent: existing ids are kept).

    Returns the row count per table. Row 4 of customers is reset to the seed's
    ``(4, 'John', 'New York', '2222', 12)`` so the demo's update shows ``2222 -> 1234``.
    """
    rng = random.Random(seed)
    conn = connect(params)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS `kafka_test`")
            cur.execute(CUSTOMERS_DDL)
            cur.execute(PRODUCTS_DDL)
            rows = []
            for i in range(1, customers + 1):
                rows.append((i, rng.choice(_FIRST), rng.choice(_CITIES), str(rng.randint(1000, 9999)), rng.randint(12, 90)))
            rows[3] = (4, "John", "New York", "2222", 12)
            cur.executemany(
                "INSERT IGNORE INTO `kafka_test`.`customers` (id, name, address, phone_number, age) VALUES (%s,%s,%s,%s,%s)",
                rows,
            )
            cur.execute(
                "UPDATE `kafka_test`.`customers` SET name=%s, address=%s, phone_number=%s, age=%s WHERE id=%s",
                ("John", "New York", "2222", 12, 4),
            )
            prods = [
                (i, f"product-{i}", f"{rng.choice(['small', 'large', 'red', 'blue'])} thing #{i}", f"{rng.uniform(0.1, 50):.3f}")
                for i in range(1, products + 1)
            ]
            cur.executemany(
                "INSERT IGNORE INTO `kafka_test`.`products` (id, name, description, weight) VALUES (%s,%s,%s,%s)", prods
            )
            counts = {}
            for table in ("customers", "products"):
                cur.execute(f"SELECT COUNT(*) FROM `kafka_test`.`{table}`")
                counts[f"kafka_test.{table}"] = int(cur.fetchone()[0])
        return counts
    finally:
        conn.close()


def update_seed_customer(params: MySqlParams) -> None:
    """The seed's example: ``UPDATE customers SET phone_number='1234' WHERE id=4``."""
    conn = connect(params, "kafka_test")
    try:
        with conn.cursor() as cur:
            cur.execute("UPDATE `customers` SET `phone_number`=%s WHERE `id`=%s", ("1234", 4))
    finally:
        conn.close()


def run_sysbench(params: MySqlParams, tables: int = 2, table_size: int = 2000, events: int = 3000, threads: int = 2) -> str:
    """Prepare (once) and run sysbench ``oltp_write_only`` against database ``sbtest``.

    Returns sysbench's summary line of transactions. Raises RuntimeError (with sysbench's own
    message, never the password) if sysbench is missing or fails.
    """
    if shutil.which("sysbench") is None:
        raise RuntimeError("sysbench is not installed; install it with: apt-get install -y sysbench")
    conn = connect(params)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS `sbtest`")
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='sbtest' AND table_name LIKE 'sbtest%%'"
            )
            prepared = int(cur.fetchone()[0]) >= tables
    finally:
        conn.close()
    # Connection options go in a 0600 config file, so the password is not on the command line.
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as cfg:
        cfg.write(
            f"db-driver=mysql\nmysql-host={params['host']}\nmysql-port={params['port']}\n"
            f"mysql-user={params['user']}\nmysql-password={params['password']}\nmysql-db=sbtest\n"
        )
    os.chmod(cfg.name, 0o600)
    base = ["sysbench", f"--config-file={cfg.name}", "oltp_write_only", f"--tables={tables}", f"--table-size={table_size}"]
    try:
        if not prepared:
            _run(base + ["prepare"])
        out = _run(base + [f"--events={events}", "--time=0", f"--threads={threads}", "run"])
    finally:
        os.unlink(cfg.name)
    for line in out.splitlines():
        if "transactions:" in line:
            return " ".join(line.split())
    return "sysbench run finished"


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"sysbench {cmd[-1]} failed: {' | '.join(tail)}")
    return proc.stdout
