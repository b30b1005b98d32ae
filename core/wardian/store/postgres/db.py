"""The shared store's statements on one connection (`PgDb`, what the parts call `db`): `?` placeholders, the append
lock before a transaction's first write, and the records a pipelined batch appends written as one statement (the
module docstring of `wardian.store.postgres.engine` says why commit order needs that lock).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, LiteralString, cast

import orjson
import psycopg

from wardian.store.mailbox import INSERT_INTERACTION
from wardian.store.postgres.roster_cache import VersionedRosterCache
from wardian.store.postgres.schema import APPEND_LOCK

_ROSTER_WRITE = re.compile(r"\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(agents|sessions)\b", re.IGNORECASE)


class Pending:
    """A statement's cursor inside a pipeline (see `PgDb.pipe`): reading its outcome first syncs what is queued
    (psycopg's own cursor would report rowcount -1 until then)."""

    __slots__ = ("_cur", "_pipe")

    def __init__(self, cur: psycopg.Cursor[Any], pipe: psycopg.Pipeline) -> None:
        self._cur = cur
        self._pipe = pipe

    def _ready(self) -> psycopg.Cursor[Any]:
        if self._cur.pgresult is None:
            self._pipe.sync()
        return self._cur

    @property
    def rowcount(self) -> int:
        return self._ready().rowcount

    @property
    def description(self) -> Any:
        return self._ready().description

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur.fetchall())


# What `mailbox.admit` appends, as one statement for many rows, passed as one JSON array of the rows (identity values
# follow the rows' order). One text parameter that orjson encodes in C: eight array parameters cost psycopg's
# Python list dumper about 25 µs of app CPU per row (measured on a 2-core VM), orjson under 1 µs.
_APPEND_MANY = (
    "INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, request_id, created_at, push_state) "
    "SELECT e->>0, e->>1, (e->>2)::bigint, (e->>3)::bigint, e->>4, e->>5, (e->>6)::bigint, e->>7 "
    "FROM json_array_elements(%s::json) WITH ORDINALITY AS t(e, n) ORDER BY n"
)


class PgDb:
    """What the parts call `db`: `?` placeholders, and the append lock before a transaction's first write.

    Inside a pipelined batch (`pipe` set) statements are queued and sent together; a result is waited for only
    when an operation reads it. There the records `mailbox.admit` appends (`INSERT_INTERACTION`, whose result nobody
    reads) are held back and written as one statement, with the append lock just before it, when any other statement
    is sent (`flush`): at the latest before the batch's COMMIT."""

    def __init__(self, conn: psycopg.Connection[Any], cache: VersionedRosterCache) -> None:
        self.conn = conn
        self.cache = cache
        self.wrote = False  # this transaction has taken the append lock (and written)
        self.pipe: psycopg.Pipeline | None = None
        self.failed = False  # a statement of the open pipeline failed (the batch then runs again op by op)
        self.appends: list[Sequence[Any]] = []  # rows of INSERT_INTERACTION held back (see above)
        self._sql: dict[str, tuple[LiteralString, bool]] = {}

    def replace(self, conn: psycopg.Connection[Any]) -> None:
        """Run on `conn` from now on (the old one broke, and no transaction is open on this one)."""
        self.conn = conn
        self.wrote = False
        self.pipe = None
        self.appends = []

    def _query(self, sql: str) -> tuple[LiteralString, bool]:
        query = self._sql.get(sql)
        if query is None:
            # Our statements hold no `?` or `%` inside string literals, so a plain replacement is exact.
            query = self._sql[sql] = (q(sql.replace("%", "%%").replace("?", "%s")), bool(_ROSTER_WRITE.match(sql)))
        return query

    def _run(self, query: LiteralString, parameters: Sequence[Any]) -> Any:
        if self.appends:
            self.flush()
        cur = self.conn.execute(query, parameters)
        return cur if self.pipe is None else Pending(cur, self.pipe)

    def flush(self) -> None:
        """Write the records held back, in one statement (the append lock first)."""
        rows, self.appends = self.appends, []
        if rows:
            self.lock_appends()
            self.conn.execute(q(_APPEND_MANY), (orjson.dumps(rows).decode(),))

    def lock_appends(self) -> None:
        """Take the append lock, once per transaction (it is released at COMMIT or ROLLBACK)."""
        if not self.wrote:
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
            self.wrote = True

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        return self._run(self._query(sql)[0], parameters)

    def write(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        if self.pipe is not None and sql == INSERT_INTERACTION:
            self.appends.append(parameters)
            return None
        return self._run(self._writing(sql), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> psycopg.Cursor[Any]:
        query = self._writing(sql)
        with self.conn.cursor() as cur:
            cur.executemany(query, parameters)
            return cur

    def _writing(self, sql: str) -> LiteralString:
        """Before a statement that writes: the appends queued so far go first, the transaction holds the append lock,
        and a roster write makes the roster cache stale; the statement's query."""
        if self.appends:
            self.flush()
        self.lock_appends()
        query, roster = self._query(sql)
        if roster:
            self.cache.roster_written()
        return query


def q(text: str) -> LiteralString:
    """A statement this package builds from its own constants (savepoint names, the channel): never outside text."""
    return cast("LiteralString", text)
