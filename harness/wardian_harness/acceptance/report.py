"""The evidence report of a native run: JSON plus a short Markdown summary.

It binds the canonical interaction records (`wardian message log --json`) to each agent's exact native
rollout file (under its private CODEX_HOME/sessions), for an OpenCode agent its own store (`opencode.db`: the
ask_ ↔ ses_/msg_ binding, the stored messages and tool parts), or for a Claude Code agent its transcript (the ask_ ↔
session/message uuid binding with the transcript's sha256), thread, model, turn ids and tool calls with their
receipts, and records the exact input, the tool schema Codex was shown, the visible output (TUI screens in
attached mode) and the sha256 of every executable used. Reasoning effort that Codex does not record is
"unverified", never inferred from the requested configuration. Character and word counts are labelled as
such; they are not token counts. `tool_calls` reads the calls and their receipts out of the scripted model's requests,
in each provider's dialect.

Invariant: no authentication material. `write_report` refuses to write a report that contains any session
token of the run, anything shaped like a wardian session (`wsn1_`), a bearer header, or any value of a copied
auth file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

UNVERIFIED = "unverified"


class SecretInReport(AssertionError):
    """The report would have contained authentication material; nothing was written."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def executable_evidence(path: Path, role: str) -> dict[str, Any]:
    """The path given, the file it resolves to (symlinks followed), and that file's sha256."""
    resolved = path.resolve()
    return {"role": role, "path": str(path), "resolved": str(resolved),
            "sha256": sha256_file(resolved) if resolved.is_file() else None}


def text_counts(text: str) -> dict[str, int]:
    """Labelled counts of a text: characters (code points) and whitespace-separated words. Not tokens."""
    return {"character_count": len(text), "word_count_whitespace_separated": len(text.split())}


def read_rollout(path: Path) -> dict[str, Any]:
    """What one Codex rollout file (JSONL) says: thread, models, reasoning effort, turns and tool calls."""
    meta: dict[str, Any] = {}
    models: list[str] = []
    efforts: list[str] = []
    turn_ids: list[str] = []
    calls: dict[str, dict[str, Any]] = {}
    messages: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        kind, payload = entry.get("type"), entry.get("payload") or {}
        if kind == "session_meta":
            meta = {k: payload.get(k) for k in ("id", "cwd", "originator", "cli_version", "source")}
        elif kind == "turn_context":
            if payload.get("model") and payload["model"] not in models:
                models.append(payload["model"])
            effort = payload.get("effort") or payload.get("reasoning_effort")
            efforts.append(effort if effort else UNVERIFIED)
            if payload.get("turn_id") and payload["turn_id"] not in turn_ids:
                turn_ids.append(payload["turn_id"])
        elif kind == "event_msg" and payload.get("type") in ("task_started", "turn_started"):
            tid = payload.get("turn_id")
            if tid and tid not in turn_ids:
                turn_ids.append(tid)
        elif kind == "response_item":
            ptype = payload.get("type")
            if ptype == "function_call":
                calls[payload.get("call_id", "")] = {"call_id": payload.get("call_id"), "name": payload.get("name"),
                                                     "namespace": payload.get("namespace"),
                                                     "arguments": payload.get("arguments"), "output": None}
            elif ptype == "function_call_output" and payload.get("call_id") in calls:
                calls[payload["call_id"]]["output"] = payload.get("output")
            elif ptype == "message" and payload.get("role") == "assistant":
                text = "".join(c.get("text", "") for c in payload.get("content") or [] if isinstance(c, dict))
                messages.append({"phase": payload.get("phase"), "text": text})
    return {"path": str(path), "sha256": sha256_file(path), "session_meta": meta, "models": models,
            "reasoning_effort": efforts or [UNVERIFIED], "turn_ids": turn_ids, "tool_calls": list(calls.values()),
            "assistant_messages": messages}


def find_rollouts(codex_home: Path, thread_ids: Iterable[str] = ()) -> list[Path]:
    """The agent's rollout files; those naming one of `thread_ids` first (a rollout's name ends in its id)."""
    files = sorted((codex_home / "sessions").rglob("rollout-*.jsonl")) if (codex_home / "sessions").is_dir() else []
    wanted = [f for f in files if any(t and t in f.name for t in thread_ids)]
    return wanted + [f for f in files if f not in wanted]


OPENCODE_DB_FILES = ("opencode.db", "opencode.db-wal")


def read_opencode_store(data_home: Path, session_ids: Iterable[str] = ()) -> dict[str, Any]:
    """What an OpenCode agent's own store says (`<XDG_DATA_HOME>/opencode/opencode.db`, SQLite in WAL mode): the
    files with their sha256, and every message of `session_ids` (all sessions when empty) with its role, parent,
    error, text and tool parts (a tool part's call id, tool name, input and output: the tool receipts).

    It reads a copy of the database files, so it neither locks nor changes the store of a running OpenCode."""
    folder = data_home / "opencode"
    files = [folder / name for name in OPENCODE_DB_FILES if (folder / name).is_file()]
    out: dict[str, Any] = {"path": str(folder / OPENCODE_DB_FILES[0]),
                           "files": [{"path": str(f), "sha256": sha256_file(f)} for f in files],
                           "sessions": [], "messages": []}
    if not files:
        return out
    wanted = [s for s in session_ids if s]
    with tempfile.TemporaryDirectory(prefix="wardian-ocdb-") as tmp:
        for f in files:
            shutil.copyfile(f, Path(tmp) / f.name)
        with closing(sqlite3.connect(Path(tmp) / OPENCODE_DB_FILES[0])) as db:
            sessions = db.execute("SELECT id, title, directory FROM session ORDER BY time_created").fetchall()
            out["sessions"] = [{"id": i, "title": t, "directory": d} for i, t, d in sessions
                               if not wanted or i in wanted]
            chosen = [s["id"] for s in out["sessions"]]
            for mid, sid, data in db.execute("SELECT id, session_id, data FROM message ORDER BY time_created, id"):
                if sid not in chosen:
                    continue
                info = json.loads(data)
                error = info.get("error") or {}
                message: dict[str, Any] = {"id": mid, "session_id": sid, "role": info.get("role"),
                                           "parent_id": info.get("parentID"), "finish": info.get("finish"),
                                           "error": error.get("name"), "texts": [], "tool_calls": []}
                for (pdata,) in db.execute("SELECT data FROM part WHERE message_id = ? ORDER BY time_created, id",
                                           (mid,)):
                    part = json.loads(pdata)
                    if part.get("type") == "text" and not part.get("synthetic"):
                        message["texts"].append(part.get("text", ""))
                    elif part.get("type") == "tool":
                        state = part.get("state") or {}
                        message["tool_calls"].append({"call_id": part.get("callID"), "tool": part.get("tool"),
                                                      "status": state.get("status"), "input": state.get("input"),
                                                      "output": state.get("output")})
                out["messages"].append(message)
    return out


def _auth_values(auth_files: Iterable[Path]) -> list[str]:
    values: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and len(value) >= 12:
            values.append(value)

    for path in auth_files:
        try:
            walk(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return values


def check_no_secrets(text: str, secrets: Iterable[str] = (), auth_files: Iterable[Path] = ()) -> None:
    """Raises: SecretInReport: `text` holds a session token, a wsn1_ session, a bearer header or auth values."""
    needles = [s for s in secrets if s] + _auth_values(auth_files)
    hits = [n[:8] + "…" for n in needles if n in text]
    if "wsn1_" in text:
        hits.append("wsn1_…")
    if "bearer " in text.lower():
        hits.append("Bearer …")
    if hits:
        raise SecretInReport(f"the report would contain authentication material: {hits}")


def markdown_summary(report: Mapping[str, Any]) -> str:
    """A short human summary of the JSON report."""
    run = report["run"]
    corr = report.get("correlation", {})
    lines = [f"# Native acceptance: {run['mode']}{' + lifecycle' if run.get('lifecycle') else ''} "
             f"({'real model' if run.get('real_model') else 'scripted model'})", "",
             f"- outcome: **{report.get('outcome', 'unknown')}**",
             f"- Codex: {run['codex']['version']} (`{run['codex']['path']}`, sha256 {run['codex']['sha256']})"]
    for exe in report.get("executables", []):
        lines.append(f"- {exe['role']}: `{exe['path']}` sha256 {exe['sha256']}")
    lines += ["", "## Input", "", "```", report["input"]["text"], "```",
              f"({report['input']['counts']['character_count']} characters, "
              f"{report['input']['counts']['word_count_whitespace_separated']} whitespace-separated words; "
              "not tokens)", "", "## Correlation", ""]
    lines += [f"- {k}: `{v}`" for k, v in corr.items()]
    lines += ["", "## Agents", ""]
    for agent in report.get("agents", []):
        lines.append(f"### {agent['name']} ({agent['uuid']})")
        lines.append(f"- thread ids: {', '.join(agent.get('thread_ids', [])) or 'none'}")
        store = agent.get("opencode_store")
        for f in (store or {}).get("files", []):
            lines.append(f"- OpenCode store `{f['path']}` sha256 {f['sha256']}")
        for binding in agent.get("bindings", []):
            found = (f"in the transcript: {binding['in_transcript']}, carrying the ask_: "
                     f"{binding.get('holds_request')}, transcript `{binding['transcript']}` sha256 "
                     f"{binding['transcript_sha256']}" if "in_transcript" in binding
                     else f"stored: {binding['stored']}")  # Claude Code's transcript, or OpenCode's store
            lines.append(f"- `{binding['request_id']}` ↔ session `{binding['session_id']}` message "
                         f"`{binding['message_id']}` ({found})")
        for ro in agent.get("rollouts", []):
            lines.append(f"- rollout `{ro['path']}` sha256 {ro['sha256']}; models {ro['models']}; "
                         f"reasoning effort {sorted(set(ro['reasoning_effort']))}; turns {ro['turn_ids']}")
        for call in agent.get("tool_calls", []):
            out = (call.get("output") or "")
            lines.append(f"- tool call `{call['name']}` {call['arguments']} → {str(out)[:160]}")
        lines.append("")
    for check in report.get("checks", []):
        lines.append(f"- [x] {check}")
    return "\n".join(lines) + "\n"


def write_report(report: Mapping[str, Any], directory: Path, *, secrets: Iterable[str] = (),
                 auth_files: Iterable[Path] = ()) -> tuple[Path, Path]:
    """Write `report.json` and `report.md` into `directory` (0700) after the no-secret check; return both paths.

    Raises:
        SecretInReport: see `check_no_secrets`; nothing is written.
    """
    text = json.dumps(report, indent=2, ensure_ascii=False, sort_keys=False)
    summary = markdown_summary(report)
    secrets = list(secrets)
    auth_files = list(auth_files)
    check_no_secrets(text, secrets, auth_files)
    check_no_secrets(summary, secrets, auth_files)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    json_path, md_path = directory / "report.json", directory / "report.md"
    json_path.write_text(text + "\n", encoding="utf-8")
    md_path.write_text(summary, encoding="utf-8")
    os.chmod(json_path, 0o600)
    return json_path, md_path


def tool_calls(bodies: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every function call in the given request bodies' inputs, with its output (receipt), by call id. In the
    chat dialect (OpenCode), a `wardian_<tool>` function is reported as `<tool>` in namespace `mcp__wardian`; in
    the Messages dialect (Claude Code), an `mcp__wardian__<tool>` tool_use likewise."""
    calls: dict[str, dict[str, Any]] = {}
    for body in bodies:
        for message in body.get("messages", []):
            if isinstance(message, dict):
                _chat_calls(message, calls)
                _messages_calls(message, calls)
        for item in body.get("input", []):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                calls.setdefault(item["call_id"], {"call_id": item["call_id"], "name": item.get("name"),
                                                   "namespace": item.get("namespace"),
                                                   "arguments": item.get("arguments"), "output": None})
            elif item.get("type") == "function_call_output" and item.get("call_id") in calls:
                calls[item["call_id"]]["output"] = item.get("output")
    return list(calls.values())


def _chat_calls(message: dict[str, Any], calls: dict[str, dict[str, Any]]) -> None:
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {} if isinstance(call, dict) else {}
        server, _, tool = str(function.get("name", "")).partition("_")
        calls.setdefault(call["id"], {"call_id": call["id"], "name": tool or server,
                                      "namespace": f"mcp__{server}" if tool else None,
                                      "arguments": function.get("arguments"), "output": None})
    if message.get("role") == "tool" and message.get("tool_call_id") in calls:
        calls[message["tool_call_id"]]["output"] = message.get("content")


def _messages_calls(message: dict[str, Any], calls: dict[str, dict[str, Any]]) -> None:
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
            prefix, _, tool = str(block.get("name", "")).rpartition("__")
            calls.setdefault(block["id"], {"call_id": block["id"], "name": tool, "namespace": prefix or None,
                                           "arguments": json.dumps(block.get("input", {})), "output": None})
        elif block.get("type") == "tool_result" and block.get("tool_use_id") in calls:
            output = block.get("content")
            if isinstance(output, list):
                output = "".join(str(part.get("text", "")) for part in output if isinstance(part, dict))
            calls[block["tool_use_id"]]["output"] = output
