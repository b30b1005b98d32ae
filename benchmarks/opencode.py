"""OpenCode dispatch (opt-in: `--only opencode`): task admitted -> OpenCode accepted the prompt (its stored user
message's `time.created`, under the msg_ id the app chose), and admitted -> reply published for a one-message turn,
beside Codex's in the same run. Real OpenCode (pinned, from npm) and real Codex, both on the scripted model."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson

from benchmarks.apps import add_agents, bench_app, new_home
from benchmarks.codex import bench_codex_reply, followup, wait_reply
from benchmarks.config import QUICK, Config
from benchmarks.figures import emit, latency_fields, ms, pct
from wardian.client import AppClient
from wardian.home import Home


def bench_opencode(cfg: Config) -> None:
    """Task admitted -> OpenCode accepted the prompt_async, and admitted -> reply published, then Codex's reply."""
    n = 10 if cfg is QUICK else 60
    root = new_home()
    try:
        with _opencode_worker(root) as (client, script, lead, worker):
            sent, accepted, replied = _opencode_turns(client, script, lead, n)
            created = _created_times(Home(root).agent_dir(worker) / "opencode" / "data" / "opencode" / "opencode.db")
            stored = [created[msg] / 1e3 - t1_ns / 1e9 for msg, t1_ns in sent]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _emit_opencode(stored, accepted, _opencode_store_floor(n))
    _emit_opencode_reply(replied)
    bench_codex_reply(cfg)


def bench_opencode_reply(cfg: Config, **tags: str) -> None:
    """Admitted -> reply published for a one-message turn of real OpenCode on the scripted model, alone (beside
    another provider's figures); `tags` are added to the line."""
    root = new_home()
    try:
        with _opencode_worker(root) as (client, script, lead, _):
            _, _, replied = _opencode_turns(client, script, lead, 10 if cfg is QUICK else 60)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _emit_opencode_reply(replied, **tags)


@contextlib.contextmanager
def _opencode_worker(root: Path) -> Iterator[tuple[AppClient, Any, str, str]]:
    """An app on the home at `root` with a Codex-registered lead (its session) and a started OpenCode worker0 on
    the scripted model: (client, worker0's script, the lead's session, worker0's uuid)."""
    from wardian_harness.models.scripted_model import ScriptedModel
    from wardian_harness.providers.opencode_home import ScriptedOpenCode, find_opencode, opencode_overrides

    with ScriptedModel() as model, bench_app(root, {"WARDIAN_OPENCODE": str(find_opencode().executable),
                                                   "WARDIAN_SCRIPTED_MODEL_KEY": "bench"}) as app, \
            AppClient(app.home) as client:
        (_, lead), = add_agents(client, "lead", 1)
        worker = client.call("agent/add", {"name": "worker0", "provider": "opencode"})
        script = model.agent("worker0")
        client.call("agent/start", {"agent": "worker0",
                                    "config": opencode_overrides(ScriptedOpenCode(script.base_url))}, timeout_s=300)
        yield client, script, lead, str(worker["uuid"])


def _opencode_turns(client: AppClient, script: Any, lead: str,
                    n: int) -> tuple[list[tuple[str, int]], list[float], list[float]]:
    """`n` one-message turns (after two that warm OpenCode's lazily loaded provider and prompt path): for each, the
    msg_ id the app chose with the receipt's time, the app's recorded submission delay, and the time to the reply."""
    from wardian_harness.models.scripted_model import Message

    sent: list[tuple[str, int]] = []
    accepted: list[float] = []
    replied: list[float] = []
    for i in range(n + 2):  # the first two warm OpenCode's lazily loaded provider and prompt path
        script.add(Message(f"answer {i}"))
        t0 = time.perf_counter()
        rid = followup(client, lead, f"q{i}")
        t1_ns = time.time_ns()
        wait_reply(client, lead, rid)
        if i >= 2:
            replied.append(time.perf_counter() - t0)
            story = client.call("request/show", {"id": rid})["task"]
            sent.append((story["provider_message_id"], t1_ns))
            accepted.append(story["facts"]["submitted_at"] / 1e3 - t1_ns / 1e9)
    return sent, accepted, replied


def _created_times(db: Path) -> dict[str, int]:
    """OpenCode's stored messages' `time_created` (ms) by id, read from a copy of its store (with its WAL)."""
    with tempfile.TemporaryDirectory() as tmp:
        for f in (db, db.with_name(db.name + "-wal")):
            if f.exists():
                shutil.copyfile(f, Path(tmp) / f.name)
        with closing(sqlite3.connect(Path(tmp) / db.name)) as conn:
            return dict(conn.execute("SELECT id, time_created FROM message"))


def _emit_opencode(stored: list[float], accepted: list[float], floor: list[float]) -> None:
    emit("opencode_admitted_to_prompt_accepted", **latency_fields([stored]), unit="ms",
         target="p50_ms <= 5, p99_ms <= 20", met=pct(stored, 0.5) <= 0.005 and pct(stored, 0.99) <= 0.020,
         how="receipt returned (task committed) -> OpenCode stored the user message under the msg_ id the app chose "
             "(its time.created; 1 ms resolution), agent idle",
         app_recorded_p50_ms=ms(pct(accepted, 0.5)), app_recorded_p99_ms=ms(pct(accepted, 0.99)),
         opencode_own_p50_ms=ms(pct(floor, 0.5)), opencode_own_p99_ms=ms(pct(floor, 0.99)),
         opencode_own_how="a raw http.client POST of a noReply message to a fresh serve of the same binary -> its "
                          "time.created: OpenCode's own share, which no client can go below")


def _emit_opencode_reply(replied: list[float], **tags: str) -> None:
    emit("opencode_admitted_to_reply_published", **latency_fields([replied]), unit="ms",
         how="followup call -> the requester receives reply done, one-message turn of real OpenCode on the scripted "
             "model (the first two turns, which load OpenCode's provider, not counted)", **tags)


def _opencode_store_floor(n: int) -> list[float]:
    """OpenCode's own time from a request's first byte to the message's `time.created`: a fresh `opencode serve`
    (private XDG dirs, no model needed for `noReply`), one keep-alive http.client connection, `n` messages."""
    from wardian.providers.opencode.runtime import new_message_id
    from wardian_harness.providers.opencode_home import find_opencode

    root = new_home()
    env = {**os.environ, "HOME": str(root), "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
           "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"}
    for key in ("CONFIG", "DATA", "CACHE", "STATE"):
        env[f"XDG_{key}_HOME"] = str(root / key.lower())
    proc = subprocess.Popen([str(find_opencode().executable), "serve", "--hostname", "127.0.0.1", "--port", "0"],
                            env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True, encoding="utf-8", start_new_session=True)
    samples: list[float] = []
    try:
        assert proc.stdout is not None
        url = next(line.split("listening on ", 1)[1].strip() for line in proc.stdout if "listening on " in line)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)

        def call(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
            conn.request(method, path, body=orjson.dumps(body) if body is not None else None,
                         headers={"content-type": "application/json"})
            return orjson.loads(conn.getresponse().read() or b"null")

        session = call("POST", "/session", {})["id"]
        for i in range(n + 3):
            mid = new_message_id()
            t0 = time.time_ns()
            call("POST", f"/session/{session}/message",
                 {"messageID": mid, "noReply": True, "parts": [{"type": "text", "text": f"m{i}"}]})
            created = call("GET", f"/session/{session}/message/{mid}")["info"]["time"]["created"]
            if i >= 3:
                samples.append((created - t0 / 1e6) / 1e3)
        conn.close()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # a bench child; OpenCode may ignore SIGTERM (docs/providers/opencode.md)
        proc.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
    return samples
