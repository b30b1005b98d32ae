"""How `wardian up|down|status` print: a live line per agent on a terminal (rewritten in place with plain ANSI cursor
moves), a plain line per change otherwise (a log, a pipe, CI), and the tables at the end."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from wardian.cli.output import out
from wardian.durations import duration_text


class PlainLines:
    """A line `NAME: what happens` per change, in the order they happen."""

    def __init__(self, names: Sequence[str], stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._width = max((len(n) for n in names), default=0)

    def show(self, name: str, text: str) -> None:
        with self._lock:
            self._stream.write(f"{name.ljust(self._width)}  {text}\n")
            self._stream.flush()

    def close(self) -> None:
        pass


class LiveLines(PlainLines):
    """One line per agent, each rewritten in place as its agent moves on (the cursor goes up to that line, clears
    it, writes it, and comes back below the block). A line is cut to the terminal's width: a wrapped line would
    throw the cursor arithmetic off."""

    def __init__(self, names: Sequence[str], stream: TextIO) -> None:
        super().__init__(names, stream)
        self._names = list(dict.fromkeys(names))
        self._columns = max(20, shutil.get_terminal_size().columns - 1)
        for name in self._names:
            self._stream.write(self._line(name, "waiting") + "\n")
        self._stream.flush()

    def _line(self, name: str, text: str) -> str:
        line = f"{name.ljust(self._width)}  {text}"
        return line if len(line) <= self._columns else line[: self._columns - 1] + "…"

    def show(self, name: str, text: str) -> None:
        if name not in self._names:
            with self._lock:
                self._names.append(name)
                self._stream.write(self._line(name, text) + "\n")
                self._stream.flush()
            return
        with self._lock:
            up = len(self._names) - self._names.index(name)
            self._stream.write(f"\x1b[{up}A\r\x1b[2K{self._line(name, text)}\x1b[{up}B\r")
            self._stream.flush()


def progress(names: Sequence[str], stream: TextIO) -> PlainLines:
    """Live lines on a terminal (not a dumb one) that has room for all of them (the cursor cannot go back up to a
    line scrolled off the screen), plain lines otherwise."""
    live = (stream.isatty() and os.environ.get("TERM", "") not in ("", "dumb")
            and len(names) < shutil.get_terminal_size().lines)
    return (LiveLines if live else PlainLines)(names, stream)


def table(rows: Sequence[Sequence[str]]) -> None:
    """Columns padded to their widest cell, the first row the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def worktree_line(w: Mapping[str, Any]) -> str:
    """An agent's worktree for a person: where, its branch, commits ahead of its base, and its changes."""
    ahead = "" if w["ahead"] is None else f", {w['ahead']} commit(s) ahead of {w['base']}"
    state = {"clean": "clean", "dirty": f"dirty ({w['changed']} changed file(s))",
             "missing": "missing (its next start makes it again)"}.get(w["state"], f"unknown ({w['reason']})")
    return f"worktree {w['path']} on {w['branch']}{ahead}, {state}"


def policy_line(p: Mapping[str, Any]) -> str:
    """The team's task policy (`app/status`' `task_policy`) in one line of `wardian status` (docs/guide/teams.md)."""
    deadline = p["task_deadline_ms"]
    return (f"task policy: task_deadline {'none' if deadline is None else duration_text(deadline)}, "
            f"max_task_depth {p['max_task_depth']}, max_chain_tasks {p['max_chain_tasks']}")
