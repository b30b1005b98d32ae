"""Shared pieces of the reliability suites: sizes, the summary report, a real app with a fake Codex, and
direct reads of the store (the harness's view from outside the app).

Sizes: the [CI] size by default, the [NIGHTLY] size when WARDIAN_RELIABILITY_NIGHTLY=1. Every scenario that
counts rounds appends one JSON line to $WARDIAN_RELIABILITY_REPORT (when set) for `scripts/reliability.py`.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import AppHandle, AppProcess, start_app, stop_app
from wardian import errors
from wardian.client import AppClient
from wardian.home import Home

NIGHTLY = os.environ.get("WARDIAN_RELIABILITY_NIGHTLY") == "1"
REPORT_ENV = "WARDIAN_RELIABILITY_REPORT"
FAKE_CODEX = Path(__file__).parents[1] / "providers" / "codex" / "fake_codex.py"


def size(ci: int, nightly: int) -> int:
    return nightly if NIGHTLY else ci


def seeded_random(test: str) -> tuple[random.Random, int]:
    """A random source whose seed is printed (and reported) so a failing round can be replayed."""
    seed = int(os.environ.get("WARDIAN_RELIABILITY_SEED", "0")) or random.SystemRandom().randrange(1, 2**32)
    print(f"{test}: seed {seed} (WARDIAN_RELIABILITY_SEED={seed} replays it)", file=sys.stderr)
    return random.Random(seed), seed


def report(row: str, *, rounds: int, lost: int = 0, duplicated: int = 0, replayed: int = 0,
           integrity_failures: int = 0, **extra: Any) -> None:
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    line = {"row": row, "rounds": rounds, "lost": lost, "duplicated": duplicated, "replayed": replayed,
            "integrity_failures": integrity_failures, **extra}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


# The shared store each home's app was started on (`start_with(..., store_url=)`); absent: the home's SQLite file.
_SHARED_STORE: dict[Path, str] = {}


def store_url_of(root: Path) -> str | None:
    return _SHARED_STORE.get(root)


def db_rows(root: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read the store directly (the app is stopped or killed, or only reads race with it): the home's SQLite file,
    or the PostgreSQL database its app serves (`?` parameters either way)."""
    url = _SHARED_STORE.get(root)
    if url is not None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as pg:
            cur = pg.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]  # the tests' own literals
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
    conn = sqlite3.connect(root / "wardian.db", timeout=30)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def integrity_ok(root: Path) -> bool:
    """SQLite: `PRAGMA integrity_check`. PostgreSQL (which checks its pages itself and has no such pragma): every
    interaction's task row and every task's interaction are there, and no public id appears twice."""
    if _SHARED_STORE.get(root) is None:
        return db_rows(root, "PRAGMA integrity_check") == [("ok",)]
    orphans = db_rows(root, "SELECT count(*) FROM interactions i LEFT JOIN tasks t ON t.interaction_id = i.id "
                            "WHERE i.kind = 'task' AND t.interaction_id IS NULL")[0][0]
    twice = db_rows(root, "SELECT count(*) - count(DISTINCT public_id) FROM interactions")[0][0]
    return orphans == 0 and twice == 0


def handle(root: Path, proc: Any) -> AppHandle:
    return AppHandle(Home(root), proc, AppClient(Home(root)))


@dataclass
class FakeCodex:
    """The fake `codex` of one test: its wrapper executable, its policy file and its request log."""

    dir: Path
    wrapper: Path = field(init=False)
    config: Path = field(init=False)
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.wrapper = self.dir / "codex"
        self.config = self.dir / "policy.json"
        self.log = self.dir / "requests.jsonl"
        self.wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -S {FAKE_CODEX} "$@"\n', encoding="utf-8")
        self.wrapper.chmod(0o755)
        self.configure()

    def configure(self, **policy: str) -> None:
        tmp = self.config.with_suffix(".tmp")
        tmp.write_text(json.dumps(policy), encoding="utf-8")
        tmp.replace(self.config)

    def env(self) -> dict[str, str]:
        return {"WARDIAN_CODEX": str(self.wrapper), "RELIABILITY_FAKE_CODEX_CONFIG": str(self.config),
                "RELIABILITY_FAKE_CODEX_LOG": str(self.log)}

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def attempts(self, request_id: str) -> list[dict[str, Any]]:
        """Submissions of this task that Codex may have admitted (every answer but a stale-turn rejection)."""
        return self.attempts_by_request().get(request_id, [])

    def attempts_by_request(self) -> dict[str, list[dict[str, Any]]]:
        """`attempts` of every task at once, reading the log once (D2 looks up tens of thousands of tasks)."""
        found: dict[str, list[dict[str, Any]]] = {}
        for entry in self.entries():
            if entry["answer"] != "stale":
                for rid in entry["request_ids"]:
                    found.setdefault(rid, []).append(entry)
        return found


def start_with(root: Path, extra_env: dict[str, str] | None = None, store_url: str | None = None) -> AppHandle:
    """`tests.conftest.start_app` on `root`, as a handle (the app's stderr is read continuously: `app_stderr`); on
    the shared store `store_url` when given, which `db_rows` then reads."""
    if store_url is not None:
        _SHARED_STORE[root] = store_url
    return handle(root, start_app(root, extra_env, store_url=store_url))


def app_stderr(app: AppHandle) -> bytes:
    """What the app wrote to stderr so far (complete once it has exited)."""
    assert isinstance(app.proc, AppProcess)
    return app.proc.stderr_output()


def stop(app: AppHandle) -> None:
    app.client.close()
    if app.proc.poll() is None:
        app.proc.terminate()
        try:
            app.proc.wait(30)
        except subprocess.TimeoutExpired:
            app.proc.kill()
            app.proc.wait(10)
    stop_app(app.proc)


def kill9(app: AppHandle) -> None:
    app.client.close()
    app.proc.kill()
    app.proc.wait(30)
    stop_app(app.proc)


def poll(check: Callable[[], Any], what: str, attempts: int = 1000) -> Any:
    """Call `check` until it returns something truthy, at most `attempts` times, 10 ms apart (a bounded
    poll with a count, for facts that have no event to wait on, like a child process being ready)."""
    pause = threading.Event()
    for _ in range(attempts):
        got = check()
        if got:
            return got
        pause.wait(0.01)
    raise AssertionError(f"{what}: not reached after {attempts} attempts")


def agent_row(app: AppHandle, name: str) -> dict[str, Any]:
    return next(a for a in app.call("agent/list")["agents"] if a["name"] == name)


def wait_owner_ready(app: AppHandle, name: str, after_generation: int = 0) -> int:
    """Until the app observed a Codex owner of a generation above `after_generation` ready; its generation."""
    def ready() -> int:
        row = agent_row(app, name)
        return int(row["generation"]) if row["generation"] > after_generation and row["status"] in (
            "idle", "active") else 0
    return int(poll(ready, f"{name}'s owner ready"))


def call_outcome(client: AppClient, method: str, params: dict[str, Any]) -> tuple[str, Any]:
    """One call's outcome as the caller sees it: ("admitted", result), ("not_admitted", error) or
    ("uncertain", error)."""
    try:
        return "admitted", client.call(method, params)
    except errors.DeliveryUncertain as exc:
        return "uncertain", exc
    except errors.WardianError as exc:
        return "not_admitted", exc
