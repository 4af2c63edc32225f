"""Key state: a byte-keyed store of the last full row per primary key, in memory or on disk.

Operators that need per-key state (:class:`~changelake.changelog.normalize.ChangelogNormalize`,
the upsert-kafka source) keep it in a :class:`KeyStateStore`. Two implementations share one
contract (and one test suite):

* :class:`MemoryKeyStateStore` - a dict; lost on restart.
* :class:`SqliteKeyStateStore` - stdlib :mod:`sqlite3` in WAL mode, one file in a directory;
  durable across restarts, data lives on disk (10M keys need far less than 1 GB of RAM; the
  page cache is capped, see ``cache_mb``). Writes are batched in one transaction until
  :meth:`KeyStateStore.commit`.

Besides keys, a store keeps a few named metadata values (``get_meta``/``put_meta``), committed
atomically with the keys: the upsert-kafka source stores the next offset per partition there,
so a restart resumes where the last commit left off.

Rows are stored with :func:`encode_values` / :func:`decode_values`, a stable tagged-JSON codec
for every Python value type of :mod:`changelake.changelog.types`.

Example::

    store = SqliteKeyStateStore("/var/lib/changelake/state/pageviews")
    store.put(b"k", encode_values({"id": 1}))
    store.put_meta("offset:topic:0", b"42")
    store.commit()   # both or neither survive a crash
    store.close()
"""

from __future__ import annotations

import abc
import base64
import datetime as dt
import json
import os
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from changelake.changelog.errors import KeyStateError

__all__ = [
    "KeyStateStore",
    "MemoryKeyStateStore",
    "SqliteKeyStateStore",
    "encode_values",
    "decode_values",
    "encode_key",
]


# -- codec ----------------------------------------------------------------------------------------


def _tag(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Decimal):
        return {"$dec": str(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bin": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dt.datetime):
        return {"$ts": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"$td": [value.days, value.seconds, value.microseconds]}
    raise TypeError(f"key state cannot store a value of type {type(value).__name__}")


def _untag(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    ((tag, raw),) = value.items()
    if tag == "$dec":
        return Decimal(raw)
    if tag == "$bin":
        return base64.b64decode(raw)
    if tag == "$ts":
        return dt.datetime.fromisoformat(raw)
    if tag == "$date":
        return dt.date.fromisoformat(raw)
    if tag == "$td":
        return dt.timedelta(days=raw[0], seconds=raw[1], microseconds=raw[2])
    raise KeyStateError(f"unknown value tag {tag!r} in key state")


#: ``json.dumps(obj, separators=(",", ":"))`` without building an encoder per call
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode


def encode_values(values: Mapping[str, Any]) -> bytes:
    """Encode a row's values (column -> Python value) as compact, deterministic UTF-8 JSON.

    Decimal, bytes, date, datetime (naive or aware) and timedelta are tagged so that
    :func:`decode_values` returns equal values of the same types. Raises TypeError for other types.
    """
    return _COMPACT({k: _tag(v) for k, v in values.items()}).encode()


def decode_values(data: bytes) -> dict[str, Any]:
    """Inverse of :func:`encode_values`. Raises KeyStateError if the bytes are not such a row."""
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise KeyStateError(f"corrupt row in key state: {data[:80]!r}") from exc
    return {k: _untag(v) for k, v in raw.items()}


def encode_key(key: Sequence[Any]) -> bytes:
    """Stable bytes of a primary-key tuple (PK order), for use as a store key.

    ``[1]`` for the key ``(1,)``, ``["eu",3]`` for ``("eu", 3)``: compact JSON of the tagged values
    (see :func:`encode_values`)."""
    if len(key) == 1 and type(key[0]) is int:
        return b"[%d]" % key[0]  # what the general path writes for one int
    return _COMPACT([_tag(v) for v in key]).encode()


# -- stores ---------------------------------------------------------------------------------------


class KeyStateStore(abc.ABC):
    """A byte-keyed map plus named metadata, with explicit commit.

    Writes (``put``, ``delete``, ``put_meta``) become durable together at :meth:`commit`; a
    durable store that crashes before ``commit`` reopens at the last commit. Not thread-safe:
    one writer at a time.
    """

    @abc.abstractmethod
    def get(self, key: bytes) -> bytes | None:
        """The value stored for ``key``, or None."""

    @abc.abstractmethod
    def put(self, key: bytes, value: bytes) -> None:
        """Store ``value`` for ``key`` (replacing any previous value)."""

    @abc.abstractmethod
    def delete(self, key: bytes) -> None:
        """Remove ``key``; a missing key is not an error."""

    @abc.abstractmethod
    def get_meta(self, name: str) -> bytes | None:
        """A named metadata value (e.g. a partition's next offset), or None."""

    @abc.abstractmethod
    def put_meta(self, name: str, value: bytes) -> None:
        """Set a named metadata value; committed together with the keys."""

    @abc.abstractmethod
    def meta_items(self, prefix: str = "") -> list[tuple[str, bytes]]:
        """All metadata (name, value) pairs whose name starts with ``prefix``, sorted by name."""

    @abc.abstractmethod
    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Iterate over (key, value) pairs, in key byte order."""

    @abc.abstractmethod
    def commit(self) -> None:
        """Make every write since the last commit durable (no-op for memory)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release resources; uncommitted writes are discarded. Idempotent."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of keys (metadata not counted)."""

    def __enter__(self) -> "KeyStateStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemoryKeyStateStore(KeyStateStore):
    """Key state in a Python dict. Fast, not durable: a restart starts empty."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._meta: dict[str, bytes] = {}
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise KeyStateError("key state store is closed")

    def get(self, key: bytes) -> bytes | None:
        self._check()
        return self._data.get(key)

    def data(self) -> dict[bytes, bytes]:
        """The dict holding the state (key -> value, both ``bytes``) itself, for a caller's hot
        loop (the upsert-kafka source): a write to it is a write to the store; keys and values
        put into it must be ``bytes``. Raises KeyStateError when the store is closed."""
        self._check()
        return self._data

    def put(self, key: bytes, value: bytes) -> None:
        self._check()
        self._data[bytes(key)] = bytes(value)

    def delete(self, key: bytes) -> None:
        self._check()
        self._data.pop(key, None)

    def get_meta(self, name: str) -> bytes | None:
        self._check()
        return self._meta.get(name)

    def put_meta(self, name: str, value: bytes) -> None:
        self._check()
        self._meta[name] = bytes(value)

    def meta_items(self, prefix: str = "") -> list[tuple[str, bytes]]:
        self._check()
        return sorted((k, v) for k, v in self._meta.items() if k.startswith(prefix))

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        self._check()
        return iter(sorted(self._data.items()))

    def commit(self) -> None:
        self._check()

    def close(self) -> None:
        self._closed = True

    def __len__(self) -> int:
        self._check()
        return len(self._data)


class SqliteKeyStateStore(KeyStateStore):
    """Durable key state in one SQLite file (WAL journal) inside the directory ``path``.

    Args:
        path: directory (created if missing) holding ``key_state.sqlite3``. Deleting the
            directory drops the state; the upsert-kafka source then rebuilds it from the
            earliest offset.
        cache_mb: SQLite page-cache cap in MiB (default 64); RAM use stays near this bound
            whatever the number of keys, since the data lives on disk.

    All writes since the last :meth:`commit` form one SQLite transaction (batched), so a crash
    loses them together. Key writes are held in memory (the last write per key, read back by
    :meth:`get`) and written with ``executemany`` at :meth:`commit` (or every ``PENDING_MAX``
    keys), instead of one statement per write. Raises KeyStateError if the file is not a key-state database.
    """

    FILE_NAME = "key_state.sqlite3"
    #: key writes kept in memory (last write per key) before they go to SQLite with
    #: ``executemany``; :meth:`commit`, :meth:`items` and ``len()`` write them first
    PENDING_MAX = 10_000

    def __init__(self, path: str | os.PathLike[str], *, cache_mb: int = 64) -> None:
        self.path = Path(path)
        self.cache_mb = cache_mb
        self._conn: sqlite3.Connection | None = None
        self._pending: dict[bytes, bytes | None] = {}
        self._open()

    @property
    def file(self) -> Path:
        """The SQLite database file."""
        return self.path / self.FILE_NAME

    def _open(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.file, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA cache_size=-{int(self.cache_mb) * 1024}")
            conn.execute("CREATE TABLE IF NOT EXISTS `state` (`k` BLOB PRIMARY KEY, `v` BLOB NOT NULL) WITHOUT ROWID")
            conn.execute("CREATE TABLE IF NOT EXISTS `meta` (`k` TEXT PRIMARY KEY, `v` BLOB NOT NULL) WITHOUT ROWID")
        except sqlite3.DatabaseError as exc:
            raise KeyStateError(
                f"cannot open key state {self.file}: {exc}; delete the directory {self.path} to rebuild it"
            ) from exc
        self._conn = conn

    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            raise KeyStateError(f"key state store {self.file} is closed")
        return self._conn

    def _write(self) -> sqlite3.Connection:
        conn = self._c()
        if not conn.in_transaction:
            conn.execute("BEGIN")
        return conn

    def get(self, key: bytes) -> bytes | None:
        pending = self._pending
        if pending:
            k = bytes(key)
            if k in pending:
                self._c()
                return pending[k]
        row = self._c().execute("SELECT `v` FROM `state` WHERE `k` = ?", (bytes(key),)).fetchone()
        return None if row is None else bytes(row[0])

    def put(self, key: bytes, value: bytes) -> None:
        self._c()
        self._pending[bytes(key)] = bytes(value)
        if len(self._pending) >= self.PENDING_MAX:
            self._write_pending()

    def delete(self, key: bytes) -> None:
        self._c()
        self._pending[bytes(key)] = None
        if len(self._pending) >= self.PENDING_MAX:
            self._write_pending()

    def _write_pending(self) -> None:
        """Write the batched key writes into the open transaction (two ``executemany``)."""
        pending = self._pending
        if not pending:
            return
        conn = self._write()
        puts = [(k, v) for k, v in pending.items() if v is not None]
        deletes = [(k,) for k, v in pending.items() if v is None]
        if puts:
            conn.executemany("INSERT OR REPLACE INTO `state` (`k`, `v`) VALUES (?, ?)", puts)
        if deletes:
            conn.executemany("DELETE FROM `state` WHERE `k` = ?", deletes)
        pending.clear()

    def get_meta(self, name: str) -> bytes | None:
        row = self._c().execute("SELECT `v` FROM `meta` WHERE `k` = ?", (name,)).fetchone()
        return None if row is None else bytes(row[0])

    def put_meta(self, name: str, value: bytes) -> None:
        self._write().execute("INSERT OR REPLACE INTO `meta` (`k`, `v`) VALUES (?, ?)", (name, bytes(value)))

    def meta_items(self, prefix: str = "") -> list[tuple[str, bytes]]:
        rows = self._c().execute("SELECT `k`, `v` FROM `meta` ORDER BY `k`").fetchall()
        return [(k, bytes(v)) for k, v in rows if k.startswith(prefix)]

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        self._c()
        self._write_pending()
        cur = self._c().execute("SELECT `k`, `v` FROM `state` ORDER BY `k`")
        for k, v in cur:
            yield bytes(k), bytes(v)

    def commit(self) -> None:
        conn = self._c()
        self._write_pending()
        if conn.in_transaction:
            conn.execute("COMMIT")

    def close(self) -> None:
        self._pending.clear()
        if self._conn is not None:
            try:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
            finally:
                self._conn.close()
                self._conn = None

    def __len__(self) -> int:
        """Number of keys; a full index scan (about 1 s per 10M keys), not for hot paths."""
        self._c()
        self._write_pending()
        return int(self._c().execute("SELECT COUNT(*) FROM `state`").fetchone()[0])
