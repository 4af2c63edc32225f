"""Classify the SQL text of binlog query events without keeping it.

The binlog reader sees the query events of every session of the server, including account
management whose text may hold a password (``CREATE USER ... IDENTIFIED BY 'pw'``). The text is
only classified here; what leaves this module is a :class:`StatementKind`, table names and (for
logs or errors) :func:`describe`, which never returns an account statement's text.
"""

from __future__ import annotations

import enum
import re

from changelake.changelog.schema import TableId

__all__ = ["StatementKind", "classify", "describe", "is_account_statement", "mentioned_tables", "dml_target", "xa_id", "xid_key", "strip_comments",
           "added_column_fills_rows", "parse_table_renames"]


class StatementKind(enum.Enum):
    """What a query event does, as far as change capture is concerned."""

    BEGIN = "begin"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"  # SAVEPOINT / ROLLBACK TO / RELEASE SAVEPOINT inside a transaction
    XA_START = "xa start"
    XA_END = "xa end"
    XA_PREPARE = "xa prepare"
    XA_COMMIT = "xa commit"
    XA_ROLLBACK = "xa rollback"
    DML = "dml"  # a change logged as a statement (binlog_format STATEMENT/MIXED)
    ACCOUNT = "account"  # user / role / privilege management
    OTHER = "other"  # DDL and everything else


_COMMENTS = re.compile(r"/\*.*?\*/|--[^\n]*|#[^\n]*", re.DOTALL)
_LITERALS = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"", re.DOTALL)
_ACCOUNT = re.compile(
    r"^(?:CREATE|ALTER|DROP|RENAME)\s+(?:DEFINER\s*=\s*\S+\s+)?(?:USER|ROLE)\b|^(?:GRANT|REVOKE)\b|^SET\s+(?:PASSWORD|ROLE|DEFAULT\s+ROLE)\b",
    re.IGNORECASE,
)
_SECRET_WORDS = re.compile(r"\bIDENTIFIED\s+(?:BY|WITH|VIA)\b|\bPASSWORD\s*\(", re.IGNORECASE)
_DML = re.compile(r"^(?:INSERT|REPLACE|UPDATE|DELETE|LOAD\s+(?:DATA|XML))\b", re.IGNORECASE)
_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = re.compile(rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?")
_TARGET = re.compile(
    rf"^(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*(?:\s+INTO)?\s+({_IDENT}(?:\s*\.\s*{_IDENT})?)"
    rf"|^UPDATE(?:\s+(?:LOW_PRIORITY|IGNORE))*\s+({_IDENT}(?:\s*\.\s*{_IDENT})?)"
    rf"|^DELETE(?:\s+(?:LOW_PRIORITY|QUICK|IGNORE))*\s+FROM\s+({_IDENT}(?:\s*\.\s*{_IDENT})?)"
    rf"|^LOAD\s+(?:DATA|XML)\b.*?\bINTO\s+TABLE\s+({_IDENT}(?:\s*\.\s*{_IDENT})?)",
    re.IGNORECASE | re.DOTALL,
)
_XA_ID = re.compile(
    r"^XA\s+(?:COMMIT|ROLLBACK|END|PREPARE|START|BEGIN)\s+"
    r"(X'(?P<gh>[0-9A-Fa-f]*)'|'(?P<gs>(?:[^'\\]|\\.|'')*)')"
    r"(?:\s*,\s*(X'(?P<bh>[0-9A-Fa-f]*)'|'(?P<bs>(?:[^'\\]|\\.|'')*)'))?"
    r"(?:\s*,\s*(?P<fmt>\d+))?",
    re.IGNORECASE,
)


def strip_comments(query: str) -> str:
    """The statement without ``/* */``, ``--`` and ``#`` comments and a trailing ``;``."""
    return _COMMENTS.sub(" ", query).strip().rstrip(";").strip()


_strip = strip_comments


def is_account_statement(query: str) -> bool:
    """True for account / privilege management or any text naming a password (never to be kept)."""
    text = _strip(query)
    return bool(_ACCOUNT.match(text) or _SECRET_WORDS.search(text))


def classify(query: str) -> StatementKind:
    """The kind of a query event's statement (comments ignored, case-insensitive)."""
    text = _strip(query)
    upper = " ".join(text.upper().split())
    if _DML.match(text):  # before the account check: a change is never skipped for its values
        return StatementKind.DML
    if is_account_statement(text):
        return StatementKind.ACCOUNT
    if upper in ("BEGIN", "START TRANSACTION", "BEGIN WORK") or upper.startswith("START TRANSACTION "):
        return StatementKind.BEGIN
    if upper in ("COMMIT", "COMMIT WORK"):
        return StatementKind.COMMIT
    if upper.startswith("SAVEPOINT ") or upper.startswith("RELEASE SAVEPOINT ") or re.match(r"^ROLLBACK(?: WORK)? TO ", upper):
        return StatementKind.SAVEPOINT
    if upper in ("ROLLBACK", "ROLLBACK WORK"):
        return StatementKind.ROLLBACK
    for prefix, kind in (
        ("XA START", StatementKind.XA_START), ("XA BEGIN", StatementKind.XA_START), ("XA END", StatementKind.XA_END),
        ("XA PREPARE", StatementKind.XA_PREPARE), ("XA COMMIT", StatementKind.XA_COMMIT),
        ("XA ROLLBACK", StatementKind.XA_ROLLBACK),
    ):
        if upper.startswith(prefix):
            return kind
    return StatementKind.OTHER


_SAVEPOINT = re.compile(
    r"^(?:(SAVEPOINT)|(RELEASE)\s+SAVEPOINT|(ROLLBACK)(?:\s+WORK)?\s+TO(?:\s+SAVEPOINT)?)\s+(`(?:[^`]|``)+`|[\w$]+)$",
    re.IGNORECASE,
)


def savepoint_action(query: str) -> tuple[str, str] | None:
    """``("set" | "release" | "rollback", name)`` of a ``SAVEPOINT sp`` / ``RELEASE SAVEPOINT sp`` /
    ``ROLLBACK [WORK] TO [SAVEPOINT] sp`` statement (name unquoted, lower-cased: savepoint names
    are case-insensitive), or None for any other statement."""
    m = _SAVEPOINT.match(_strip(query))
    if not m:
        return None
    name = m.group(4)
    name = name[1:-1].replace("``", "`") if name.startswith("`") else name
    action = "set" if m.group(1) else ("release" if m.group(2) else "rollback")
    return action, name.lower()


def describe(query: str) -> str:
    """A short label of a statement for logs and errors: its first keywords, never its values,
    and for account statements only ``'account management statement (text withheld)'``."""
    if is_account_statement(query):
        return "account management statement (text withheld)"
    words = _LITERALS.sub("?", _strip(query)).split()
    return " ".join(words[:3])[:80]


def _table_id(first: str, second: str | None, default_db: str | None) -> TableId | None:
    def unquote(name: str) -> str:
        return name[1:-1].replace("``", "`") if name.startswith("`") else name

    if second:
        return TableId(unquote(first), unquote(second))
    return TableId(default_db, unquote(first)) if default_db else None


def dml_target(query: str, default_db: str | None) -> TableId | None:
    """The table a single-table INSERT / REPLACE / UPDATE / DELETE / LOAD DATA writes, if parsed."""
    m = _TARGET.match(_strip(query))
    if not m:
        return None
    ref = next(g for g in m.groups() if g)
    q = _QUALIFIED.fullmatch(ref.strip())
    return _table_id(q.group(1), q.group(2), default_db) if q else None


def mentioned_tables(query: str, default_db: str | None) -> list[TableId]:
    """Every ``name`` / ``db.name`` token of the statement outside string literals, as tables.

    Over-approximates on purpose (keywords become candidate tables too): used to decide whether a
    statement-logged change *may* touch a captured table.
    """
    text = _LITERALS.sub(" ", _strip(query))
    out: list[TableId] = []
    for m in _QUALIFIED.finditer(text):
        t = _table_id(m.group(1), m.group(2), default_db)
        if t is not None and t not in out:
            out.append(t)
    return out


def xa_id(query: str) -> str | None:
    """The XID of an ``XA COMMIT|ROLLBACK|END|PREPARE|START`` statement as ``gtrid-hex:bqual-hex:format``
    (the form :func:`xid_key` gives an XA_PREPARE event), or None if it cannot be parsed."""
    m = _XA_ID.match(_strip(query))
    if not m:
        return None

    def as_hex(hex_text: str | None, text: str | None) -> str:
        if hex_text is not None:
            return hex_text.lower()
        return (text or "").replace("''", "'").encode("utf-8").hex()

    gtrid = as_hex(m.group("gh"), m.group("gs"))
    bqual = as_hex(m.group("bh"), m.group("bs")) if (m.group("bh") is not None or m.group("bs") is not None) else ""
    return f"{gtrid}:{bqual}:{int(m.group('fmt') or 1)}"


def xid_key(gtrid: bytes, bqual: bytes, format_id: int) -> str:
    """The XID of an XA_PREPARE event in the form of :func:`xa_id`."""
    return f"{gtrid.hex()}:{bqual.hex()}:{format_id}"


_ALTER = re.compile(rf"^ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?({_IDENT})(?:\s*\.\s*({_IDENT}))?\s+(.*)$",
                    re.IGNORECASE | re.DOTALL)
#: ``ADD [COLUMN] [IF NOT EXISTS] name|(`` that adds a column (not an index, key, constraint, partition...)
_ADD_COLUMN = re.compile(r"\bADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?"
                         r"(?!(?:INDEX|KEY|CONSTRAINT|PRIMARY|UNIQUE|FOREIGN|FULLTEXT|SPATIAL|PARTITION|PERIOD|SYSTEM|CHECK)\b)",
                         re.IGNORECASE)
#: what makes MySQL write a value into the rows that exist: a non-NULL default, NOT NULL (the
#: type's implicit default), a generated column, AUTO_INCREMENT
_FILLS = re.compile(r"\bDEFAULT\s+(?!NULL\b)|\bNOT\s+NULL\b|\bAS\s*\(|\bGENERATED\b|\bAUTO_INCREMENT\b", re.IGNORECASE)


_RENAME_COLUMN = re.compile(rf"\bRENAME\s+COLUMN\b|\bCHANGE\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?({_IDENT})\s+({_IDENT})",
                            re.IGNORECASE)


def _renames(rest: str) -> bool:
    for m in _RENAME_COLUMN.finditer(rest):
        if m.group(1) is None:  # RENAME COLUMN a TO b
            return True
        old, new = (g.strip("`").lower() for g in (m.group(1), m.group(2)))
        if old != new:  # CHANGE a b ... (CHANGE a a ... only retypes)
            return True
    return False


def added_column_fills_rows(query: str, default_db: str | None) -> TableId | None:
    """The table of an ``ALTER TABLE`` that changes what the rows that already exist show,
    without binlog rows, else None: an ``ADD [COLUMN]`` whose new column MySQL fills (``DEFAULT x``
    with x not NULL, ``NOT NULL``, a generated column, ``AUTO_INCREMENT``), or a column renamed
    (``RENAME COLUMN a TO b``, ``CHANGE a b ...``: the old rows show their values under ``b``).

    Over-approximates on purpose (e.g. ``ADD c INT, MODIFY d INT DEFAULT 1`` counts): the caller
    re-reads the table, which is never wrong, only slower.
    """
    m = _ALTER.match(_strip(query))
    if not m:
        return None
    rest = m.group(3)
    add = _ADD_COLUMN.search(rest)
    if (add is None or not _FILLS.search(rest, add.end())) and not _renames(rest):
        return None
    return _table_id(m.group(1), m.group(2), default_db)


_NAME = rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?"
_RENAME_TABLE = re.compile(r"^RENAME\s+TABLES?\s+(.*)$", re.IGNORECASE | re.DOTALL)
_RENAME_PAIR = re.compile(rf"\s*(?:IF\s+EXISTS\s+)?{_NAME}\s+(?:WAIT\s+\d+\s+|NOWAIT\s+)?TO\s+{_NAME}\s*(?:,|$)", re.IGNORECASE)
#: ``RENAME [TO|AS] new`` as one clause of an ALTER TABLE (not RENAME COLUMN / INDEX / KEY)
_ALTER_RENAME = re.compile(rf"(?:^|,)\s*RENAME\s+(?!(?:COLUMN|INDEX|KEY)\b)(?:(?:TO|AS)\s+)?{_NAME}\s*(?=,|$)",
                           re.IGNORECASE)


def parse_table_renames(query: str, default_db: str | None) -> list[tuple[TableId, TableId]]:
    """The ``(old, new)`` table pairs of ``RENAME TABLE a TO b[, c TO d ...]`` or
    ``ALTER TABLE a ... RENAME [TO|AS] b``, in the statement's order (a swap through a temporary
    name gives three pairs); ``[]`` for any other statement. A name without a database takes
    ``default_db`` (a pair is left out when there is none)."""
    text = _LITERALS.sub("?", _strip(query))
    out: list[tuple[TableId, TableId]] = []
    m = _RENAME_TABLE.match(text)
    if m:
        rest, pos = m.group(1), 0
        while pos < len(rest):
            pair = _RENAME_PAIR.match(rest, pos)
            if pair is None or pair.end() == pos:
                break
            old = _table_id(pair.group(1), pair.group(2), default_db)
            new = _table_id(pair.group(3), pair.group(4), default_db)
            if old is not None and new is not None:
                out.append((old, new))
            pos = pair.end()
        return out
    a = _ALTER.match(text)
    if a:
        r = _ALTER_RENAME.search(a.group(3))
        old = _table_id(a.group(1), a.group(2), default_db)
        new = _table_id(r.group(1), r.group(2), default_db) if r else None
        if old is not None and new is not None:
            out.append((old, new))
    return out
