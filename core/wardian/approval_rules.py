"""Allow rules: an agent's `allow = ["Bash(git status:*)", "edit"]` (team file) or `agent start --allow RULE`, which
end a matching approval `allowed` by `rule` before anyone is asked (docs/guide/approvals.md#allow-rules).

The grammar is Claude Code's permission rules (https://docs.claude.com/en/docs/claude-code/iam#permission-rules),
which people know, read over the approval every provider hands the app (`wardian.providers.approvals.ApprovalAsk`):

- `NAME` matches every request of that tool; `NAME(SPECIFIER)` only those the specifier matches.
- A shell command, whatever its provider calls the tool (Claude Code's `Bash`, Codex's `shell`, OpenCode's and Pi's
  `bash`, an ACP agent's `execute` call), is matched by `Bash`, `shell`, `command` or `execute`, and by its own tool
  name. Its specifier is the command: `git status` exactly; `git status:*` or `git status *` that command alone or
  followed by arguments; any other `*` stands for any text. A command that chains, pipes, redirects or substitutes
  (`;`, `&`, `|`, `<`, `>`, a backtick, `$(`, a line break) is matched only by a rule that names it exactly, so
  `Bash(git status:*)` never allows `git status; rm -rf ~`.
- A file change (Claude Code's Edit/Write, Codex's apply_patch, OpenCode's and Pi's edit, ACP's edit) is matched by
  `Edit` or `file_change`, and by its own tool name. Its specifier is a glob every changed file must match: `/` first
  is a whole path, else the path's end (`Edit(*.md)`, `Edit(docs/*)`); `*` crosses `/`.
- Any other tool is matched by its name (case aside): `mcp__github__create_issue`, and `mcp__github` for each tool of
  that MCP server. A specifier there matches OpenCode's permission patterns, each of them; other providers give none.

Stdlib and `errors` only: the protocol checks `agent/start`'s rules here and the team file reads them here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from wardian import errors

MAX_RULES = 64
MAX_RULE_CHARS = 500
RULE_ALLOWED = ("a rule NAME or NAME(SPECIFIER) as Claude Code writes them: Bash(git status:*), shell(ls *), "
                "Edit(docs/*), edit, mcp__github__create_issue (docs/guide/approvals.md#allow-rules)")
COMMAND_NAMES = frozenset({"bash", "shell", "command", "execute"})
FILE_NAMES = frozenset({"edit", "file_change"})

_RULE = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?:\((?P<spec>.*)\))?", re.DOTALL)
_CHAINED = re.compile(r"[;&|<>`\n\r]|\$\(")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash"})


@dataclass(frozen=True, slots=True)
class AllowRule:
    text: str
    name: str
    """Lower-case: rules match tool names case aside (Claude Code's `Bash` is OpenCode's `bash`)."""
    spec: str | None


def parse_rule(text: str, field: str = "allow") -> AllowRule:
    """`text` as a rule. Raises: InvalidArguments (not a rule: the error names it and what is allowed)."""
    stripped = text.strip() if isinstance(text, str) else ""
    found = _RULE.fullmatch(stripped) if 0 < len(stripped) <= MAX_RULE_CHARS else None
    spec = found["spec"] if found else None
    if found is None or (spec is not None and not spec.strip()):
        shown = repr(text[:80]) if isinstance(text, str) else type(text).__name__
        raise errors.InvalidArguments(f"{shown} is not an allow rule", field=field, allowed=RULE_ALLOWED)
    return AllowRule(stripped, found["name"].lower(), None if spec is None else spec.strip())


def check_rules(texts: Iterable[str], field: str = "allow") -> list[str]:
    """The rules as they will be kept: each checked and stripped, repeats dropped, in order. Raises: InvalidArguments
    (a rule that is not one, or more than MAX_RULES)."""
    rules = list(dict.fromkeys(parse_rule(t, field).text for t in texts))
    if len(rules) > MAX_RULES:
        raise errors.InvalidArguments(f"{field}: {len(rules)} rules; at most {MAX_RULES}", field=field,
                                      allowed=f"at most {MAX_RULES} rules")
    return rules


def matching_rule(rules: Iterable[str], kind: str, tool: str | None, detail: Mapping[str, Any]) -> str | None:
    """The first of `rules` (kept, so checked) that allows this request (an approval's kind, tool and detail);
    None: someone must answer it."""
    for text in rules:
        rule = parse_rule(text)
        if _names(rule, kind, tool) and (rule.spec is None or _specified(rule.spec, kind, detail)):
            return rule.text
    return None


def _names(rule: AllowRule, kind: str, tool: str | None) -> bool:
    own = (tool or "").lower()
    if own and (rule.name == own or (own.startswith(rule.name + "__") and rule.name.startswith("mcp__"))):
        return True
    return (kind == "command" and rule.name in COMMAND_NAMES) or (kind == "file_change" and rule.name in FILE_NAMES)


def _specified(spec: str, kind: str, detail: Mapping[str, Any]) -> bool:
    if kind == "command":
        command = detail.get("command")
        return isinstance(command, str) and command_matches(spec, unwrapped(command))
    if kind == "file_change":
        files = detail.get("files")
        return isinstance(files, list) and bool(files) and all(
            isinstance(f, str) and path_matches(spec, f) for f in files)  # pyright: ignore[reportUnknownVariableType]
    patterns = detail.get("patterns")
    return isinstance(patterns, list) and bool(patterns) and all(
        isinstance(p, str) and fnmatchcase(p, spec) for p in patterns)  # pyright: ignore[reportUnknownVariableType]


def unwrapped(command: str) -> str:
    """The script of `bash -lc 'SCRIPT'` (how Codex reports a command it runs through a shell), else `command`."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command.strip()
    if len(words) == 3 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in ("-c", "-lc"):
        return words[2].strip()
    return command.strip()


def command_matches(spec: str, command: str) -> bool:
    """Whether the specifier `spec` allows `command` (module docstring)."""
    if spec == command:
        return True
    if "*" not in spec or _CHAINED.search(command):
        return False
    if spec.endswith(":*"):
        spec = spec[:-2].rstrip() + " *"
    if spec.endswith(" *") and command == spec[:-2].rstrip():
        return True
    pattern = ".*".join(re.escape(part) for part in spec.split("*"))
    return re.fullmatch(pattern, command, re.DOTALL) is not None


def path_matches(spec: str, path: str) -> bool:
    if "/../" in f"/{path}/":
        return False
    if spec.startswith("/"):
        return fnmatchcase(path, spec)
    return fnmatchcase(path, spec) or fnmatchcase(path, "*/" + spec)
