"""How a store is put together: `open_store` picks the backend, the parts mark every statement that writes, and on
the shared store only a transaction that writes takes the append lock (commit order is mailbox order)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.store.conftest import Backend, pg
from wardian.model import InteractionKind
from wardian.store import Store, mailbox, open_store, roster
from wardian.store import testing as store_testing
from wardian.store.sqlite import SqliteBackend
from wardian_harness.hosts.postgres import PrivateCluster

PARTS = Path(__file__).resolve().parents[2] / "core" / "wardian" / "store"
WRITES = re.compile(r"\s*(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)


@dataclass
class _Home:
    db_path: Path


def test_open_store_opens_the_backend_a_home_or_a_url_names(backend: Backend) -> None:
    if backend.cluster is None:
        store = open_store(_Home(backend.tmp_path / "wardian.db"))
        assert isinstance(store.backend, SqliteBackend)
    else:
        from wardian.store.postgres import PostgresBackend

        store = open_store(backend.cluster.database())
        assert isinstance(store.backend, PostgresBackend)
    backend.opened.append(store)
    assert store.backend.integrity_check() == "ok"


def test_the_embedded_store_never_loads_the_postgresql_driver(tmp_path: Path) -> None:
    """psycopg is a shared store's dependency only: opening a home's own store must not import it."""
    code = ("import sys\n"
            "from wardian.store import open_store, testing\n"
            "class Home:\n"
            f"    db_path = {str(tmp_path / 'wardian.db')!r}\n"
            "open_store(Home()).close()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'psycopg'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    """The module's top-level `NAME = <expression>` assignments (statements kept in constants)."""
    return {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


def _first_text(call: ast.Call, constants: dict[str, ast.expr]) -> str | None:
    """The leading text of a call's first argument: a string, an f-string, a parenthesised concatenation, or a
    module constant holding one."""
    if not call.args:
        return None
    arg = call.args[0]
    while isinstance(arg, ast.BinOp | ast.Name):
        if isinstance(arg, ast.Name):
            if arg.id not in constants:
                return None
            arg = constants[arg.id]
        else:
            arg = arg.left
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value)
    return None


def test_every_statement_of_the_parts_that_writes_says_so() -> None:
    """A shared store takes its append lock in `Db.write` only: a write run through `execute` would break commit
    order across hosts without any test on one host noticing."""
    unmarked: list[str] = []
    for name in ("roster.py", "mailbox.py", "history.py", "ledger.py", "hosts.py"):
        tree = ast.parse((PARTS / name).read_text(encoding="utf-8"))
        constants = _constants(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "execute":
                text = _first_text(node, constants)
                if text is not None and WRITES.match(text):
                    unmarked.append(f"{name}:{node.lineno}")
    assert not unmarked


def _advisory_locks(other: Store, pid: int) -> int:
    return int(store_testing.execute(
        other, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = ?", (pid,))[0][0])


def test_only_a_transaction_that_writes_takes_the_append_lock(pg_cluster: PrivateCluster) -> None:
    from wardian.store.postgres import open_postgres

    url = pg_cluster.database()
    store, other = open_postgres(url), open_postgres(url)  # other: looks at the first one's locks
    try:
        a = roster.authenticate(store, roster.create_session(store, roster.add_agent(store, "a", "codex", None).id))
        b = roster.add_agent(store, "b", "codex", None)
        (pid,) = pg(store).link.backend_pids
        with store.atomic():
            roster.list_agents(store)
            mailbox.receive(store, a, cursor=None, ack_cursor=None, limit=5)  # reads only: nothing to order
            assert _advisory_locks(other, pid) == 0
            mailbox.admit(store, a, b, InteractionKind.INFORMATION, "x")
            assert _advisory_locks(other, pid) == 1
        assert _advisory_locks(other, pid) == 0  # released at COMMIT
    finally:
        store.close()
        other.close()
