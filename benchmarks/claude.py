"""Claude Code dispatch (opt-in: `--only claude`): task admitted -> Claude Code accepted the message (its stream-json
`command_lifecycle` `queued` for the uuid the app chose), beside Claude Code's own floor measured in the same run (a
raw client's write of one user message line to a fresh process of the same binary, same flags and directory layout
-> its `queued`), the same raw client when it first makes a one-row claim durable in an SQLite database on the same
disk (WAL, synchronous=FULL, as the app's store: the floor of any client that binds the message before a byte
leaves, as the app must), and admitted -> reply published for a one-message turn, then Codex's and OpenCode's in the
same run (their lines tagged `"run": "claude"`). Real Claude Code (pinned, from npm), Codex and OpenCode, all on the
scripted model.

The app's side is read from its opt-in timing record (`WARDIAN_CLAUDE_TIMINGS`, wardian.providers.claude.timings):
the wall-clock time just before the app wrote each message's line and when it read that message's `queued`. The
bench and the app share the machine's clock, so receipt -> written is the app's own share of the figure.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import time
import uuid as uuids
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.apps import add_agents, bench_app, new_home
from benchmarks.codex import bench_codex_reply, followup, wait_reply
from benchmarks.config import QUICK, Config
from benchmarks.figures import emit, latency_fields, ms, pct
from benchmarks.opencode import bench_opencode_reply
from wardian.client import AppClient
from wardian.home import Home

WARM = 2
"""Turns of each side not counted: the first waits for Claude Code's MCP server to connect."""
STOP_S = 30.0
READY_S = 120.0
TURN_S = 60.0


def bench_claude(cfg: Config) -> None:
    """The Claude Code figures, then Codex's and OpenCode's admitted -> reply published in the same run."""
    from wardian_harness.models.scripted_model import ScriptedModel
    from wardian_harness.providers.claude_home import ScriptedClaude, claude_overrides, find_claude

    n = 10 if cfg is QUICK else 60
    root = new_home()
    timings = root / "claude-timings.jsonl"
    try:
        with ScriptedModel() as model, bench_app(root, {"WARDIAN_CLAUDE": str(find_claude().executable),
                                                       "WARDIAN_CLAUDE_TIMINGS": str(timings)}) as app, \
                AppClient(app.home) as client:
            (_, lead), = add_agents(client, "lead", 1)
            worker = client.call("agent/add", {"name": "worker0", "provider": "claude"})
            script = model.agent("worker0")
            client.call("agent/start", {"agent": "worker0",
                                        "config": claude_overrides(ScriptedClaude(script.base_url))}, timeout_s=300)
            sides = _interleaved(client, script, lead, Home(root), str(worker["uuid"]), n)
        ours, share, inside = _app_side(sides["sent"], timings)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _emit_claude(ours, share, inside, sides["floor"], sides["durable"], sides["replied"])
    bench_codex_reply(cfg, run="claude")
    bench_opencode_reply(cfg, run="claude")


def _interleaved(client: AppClient, script: Any, lead: str, home: Home, worker: str,
                 n: int) -> dict[str, list[Any]]:
    """`n` tasks through the app, each followed by one raw message to Claude Code's floor process, so both meet the
    same load: each task's uuid with the receipt's time, each task's time to its reply, each raw write's time to
    its `queued`. Every message waits for its turn's end, so each is written to an idle Claude Code."""
    from wardian_harness.models.scripted_model import Message

    out: dict[str, list[Any]] = {"sent": [], "replied": [], "floor": [], "durable": []}
    raw: RawClaude | None = None
    claims = DurableClaims(home.root / "claims.db")
    try:
        for i in range(n + WARM):
            script.add(Message(f"answer {i}"))
            t0 = time.perf_counter()
            rid = followup(client, lead, f"q{i}")
            receipt_ns = time.time_ns()
            wait_reply(client, lead, rid)
            replied = time.perf_counter() - t0
            message = str(client.call("request/show", {"id": rid})["task"]["provider_message_id"])
            if raw is None:  # after the app's first turn: its process is up, its transcript holds a delivery
                raw = RawClaude.like(home, worker, message)
            script.add(Message(f"raw answer {i}"))
            queued = raw.turn()
            script.add(Message(f"durable raw answer {i}"))
            durable = raw.turn(before=claims.claim)
            if i >= WARM:
                out["sent"].append((message, receipt_ns))
                out["replied"].append(replied)
                out["floor"].append(queued)
                out["durable"].append(durable)
    finally:
        claims.close()
        if raw is not None:
            raw.stop()
    return out


class DurableClaims:
    """What the least a client that binds a message durably before writing it pays first: one UPDATE of one row and
    its COMMIT, in an SQLite database in WAL mode with synchronous=FULL, on the same disk as the app's store."""

    def __init__(self, path: Path) -> None:
        import sqlite3

        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("CREATE TABLE claims (id INTEGER PRIMARY KEY, message TEXT)")
        self._db.execute("INSERT INTO claims VALUES (1, NULL)")

    def claim(self, message: str) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute("UPDATE claims SET message = ? WHERE id = 1", (message,))
        self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()


def _app_side(sent: list[tuple[str, int]], timings: Path) -> tuple[list[float], list[float], list[float]]:
    """From the app's timing record, per task: receipt -> `queued` read, receipt -> line written (the app's own
    share), and written -> `queued` read (Claude Code's part as the app sees it)."""
    records = {r["uuid"]: r for r in map(json.loads, timings.read_text(encoding="utf-8").splitlines())}
    missing = [m for m, _ in sent if m not in records]
    if missing:
        raise RuntimeError(f"the app's timing record lacks {len(missing)} of {len(sent)} messages ({missing[:3]})")
    ours = [(records[m]["queued_ns"] - t) / 1e9 for m, t in sent]
    share = [(records[m]["written_ns"] - t) / 1e9 for m, t in sent]
    inside = [(records[m]["queued_ns"] - records[m]["written_ns"]) / 1e9 for m, _ in sent]
    return ours, share, inside


def _emit_claude(ours: list[float], share: list[float], inside: list[float], floor: list[float],
                 durable: list[float], replied: list[float]) -> None:
    ratio = pct(ours, 0.5) / pct(floor, 0.5)
    emit("claude_admitted_to_message_queued", **latency_fields([ours]), unit="ms",
         target="p50 <= 1.2 x claude_raw_write_to_queued p50, app_share_ms <= 1",
         met=ratio <= 1.2 and pct(share, 0.5) <= 0.001, ratio_to_floor=round(ratio, 3),
         floor_p50_ms=ms(pct(floor, 0.5)), durable_floor_p50_ms=ms(pct(durable, 0.5)),
         ratio_to_durable_floor=round(pct(ours, 0.5) / pct(durable, 0.5), 3),
         durable_floor_ratio_to_floor=round(pct(durable, 0.5) / pct(floor, 0.5), 3),
         app_share_ms=ms(pct(share, 0.5)), app_share_p99_ms=ms(pct(share, 0.99)),
         app_share_by_difference_ms=ms(pct(ours, 0.5) - pct(floor, 0.5)),
         claude_in_app_p50_ms=ms(pct(inside, 0.5)), claude_in_app_p99_ms=ms(pct(inside, 0.99)),
         how="receipt returned (task committed) -> the app read Claude Code's command_lifecycle queued for the "
             "message uuid it chose, agent idle; app_share_ms: receipt -> the app starts writing the line "
             "(the app's timing record, WARDIAN_CLAUDE_TIMINGS); claude_in_app: written -> queued read")
    emit("claude_raw_write_to_queued", **latency_fields([floor]), unit="ms",
         how="a raw client writes one user message line (the same encoder, the same delivery text) to a fresh "
             "process of the same binary, same flags and directory layout, on the scripted model -> reads its "
             "queued; interleaved with the app's tasks: Claude Code's own share, which no client can go below")
    emit("claude_durable_raw_write_to_queued", **latency_fields([durable]), unit="ms",
         ratio_to_floor=round(pct(durable, 0.5) / pct(floor, 0.5), 3),
         how="the raw client of claude_raw_write_to_queued, which first commits a one-row claim of the message "
             "(SQLite WAL, synchronous=FULL, the same disk as the app's store) and then writes it -> its queued: "
             "the floor of a client that binds the message durably before a byte leaves, as the app must")
    emit("claude_admitted_to_reply_published", **latency_fields([replied]), unit="ms",
         how="followup call -> the requester receives reply done, one-message turn of real Claude Code on the "
             f"scripted model (the first {WARM} turns, the first of which waits for the MCP server, not counted)")


class RawClaude:
    """A fresh `claude -p` stream-json process started like the app's agent process, written to and read directly."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, text: str) -> None:
        from wardian.providers.claude.wire import control_line

        self._text = text
        self._buffer = b""
        self._proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, start_new_session=True, bufsize=0)
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._stdin, self._stdout = self._proc.stdin.fileno(), self._proc.stdout.fileno()
        try:
            self._write(control_line("bench_1", {"subtype": "initialize", "hooks": None}))
            self._until(lambda line: line.get("type") == "control_response", READY_S)
        except BaseException:
            self._kill()
            raise

    @classmethod
    def like(cls, home: Home, agent: str, delivered: str) -> RawClaude:
        """A process with the live agent process's argv and environment (read from /proc), but its own session and
        its own private directories of the same layout (the agent's settings.json copied), and as its message the
        delivery text the app wrote under uuid `delivered` (read from the agent's transcript)."""
        from wardian_harness.providers.claude_home import find_transcript

        pid = int(home.provider_pid_path("claude", agent).read_text(encoding="utf-8").strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8").split("\0")[:-1]
        env = dict(e.split("=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8").split("\0")
                   if "=" in e)
        cwd = os.readlink(f"/proc/{pid}/cwd")
        session = next(a.split("=", 1)[1] for a in argv if a.startswith(("--session-id=", "--resume=")))
        fresh = home.root / "rawclaude"
        for key, sub in (("CLAUDE_CONFIG_DIR", "config"), ("TMPDIR", "tmp"), ("CLAUDE_CODE_TMPDIR", "tmp"),
                         ("XDG_CACHE_HOME", "cache"), ("XDG_RUNTIME_DIR", "run")):
            (fresh / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
            env[key] = str(fresh / sub)
        claude_dir = home.agent_dir(agent) / "claude"
        shutil.copyfile(claude_dir / "config" / "settings.json", fresh / "config" / "settings.json")
        argv = [*(a for a in argv if not a.startswith(("--session-id=", "--resume="))),
                f"--session-id={uuids.uuid4()}"]
        transcript = find_transcript(claude_dir, session)
        if transcript is None:
            raise RuntimeError(f"the transcript of {agent}'s session {session} is missing")
        entry = next(e for e in map(json.loads, transcript.read_text(encoding="utf-8").splitlines())
                     if isinstance(e, dict) and e.get("uuid") == delivered)
        content = entry["message"]["content"]
        text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
        return cls(argv, env, cwd, text)

    def _write(self, line: bytes) -> None:
        view = memoryview(line)
        while view:
            view = view[os.write(self._stdin, view):]

    def _until(self, done: Callable[[dict[str, Any]], bool], timeout_s: float) -> None:
        """Read output lines (unbuffered, straight from the pipe) until one satisfies `done`. Raises: TimeoutError,
        RuntimeError (the output ended)."""
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._stdout], [], [], left)[0]:
                    raise TimeoutError(f"Claude Code's floor process printed nothing awaited in {timeout_s:g} s")
                chunk = os.read(self._stdout, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"Claude Code's floor process ended (exit {self._proc.poll()})")
                self._buffer += chunk
            raw, _, self._buffer = self._buffer.partition(b"\n")
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and done(line):
                return

    def turn(self, before: Callable[[str], None] | None = None) -> float:
        """One user message under a new uuid: the time from just before its write (or before `before(uuid)`, run
        first) to reading its `queued`; then its turn's result is read, so the next message also meets an idle
        process."""
        from wardian.providers.claude.wire import user_line

        uuid = str(uuids.uuid4())
        line = user_line(self._text, uuid)
        t0 = time.perf_counter()
        if before is not None:
            before(uuid)
        self._write(line)
        self._until(lambda m: m.get("type") == "command_lifecycle" and m.get("command_uuid") == uuid
                    and m.get("state") == "queued", TURN_S)
        queued = time.perf_counter() - t0
        self._until(lambda m: m.get("type") == "result" and uuid in (m.get("user_message_uuids") or []), TURN_S)
        return queued

    def stop(self) -> None:
        """Close the input (Claude Code exits about a second later), else end its process group."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            self._kill()
        assert self._proc.stdout is not None
        self._proc.stdout.close()

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)  # a bench child: its group (the MCP server with it)
        self._proc.wait(timeout=STOP_S)
