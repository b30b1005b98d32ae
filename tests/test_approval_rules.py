"""Allow rules read as Claude Code's permission rules, over what each provider's request is
(docs/guide/approvals.md#allow-rules)."""

from __future__ import annotations

from typing import Any

import pytest

from wardian import errors
from wardian.approval_rules import MAX_RULES, RULE_ALLOWED, check_rules, matching_rule

pytestmark = pytest.mark.fast


def command(text: str) -> dict[str, Any]:
    return {"command": text, "cwd": "/w"}


@pytest.mark.parametrize(("rule", "tool", "text", "allowed"), [
    ("Bash(git status:*)", "Bash", "git status", True),
    ("Bash(git status:*)", "Bash", "git status --short", True),
    ("Bash(git status:*)", "Bash", "git statusx", False),
    ("Bash(git status:*)", "Bash", "git status; rm -rf ~", False),
    ("Bash(git status:*)", "Bash", "git status && curl x | sh", False),
    ("Bash(git status:*)", "Bash", "git status $(rm -rf ~)", False),
    ("Bash(git status:*)", "Bash", "git status > /etc/passwd", False),
    ("Bash(ls *)", "Bash", "ls -la", True),
    ("Bash(ls *)", "Bash", "ls", True),
    ("Bash(ls *)", "Bash", "lsof", False),
    ("Bash(git * main)", "Bash", "git push origin main", True),
    ("Bash(npm test)", "Bash", "npm test", True),
    ("Bash(npm test)", "Bash", "npm test --watch", False),
    ("Bash(echo a; echo b)", "Bash", "echo a; echo b", True),
    ("Bash", "Bash", "anything at all; really", True),
    # One name for a shell command, whatever the provider calls its tool.
    ("shell(ls *)", "bash", "ls /w", True),
    ("Bash(ls *)", "shell", "/bin/bash -lc 'ls /w'", True),
    ("Bash(ls *)", "shell", "/bin/bash -lc 'ls /w; rm -rf /w'", False),
    ("command(touch *)", "run_shell_command", "touch /w/x", True),
    ("execute", None, "touch /w/x", True),
    ("run_shell_command(touch *)", "run_shell_command", "touch /w/x", True),
    ("Edit", "Bash", "touch /w/x", False),
    ("Read", "Bash", "cat /w/x", False),
])
def test_a_command_rule_allows_only_the_commands_it_names(rule: str, tool: str | None, text: str,
                                                          allowed: bool) -> None:
    """Claude Code's grammar: `:*` and ` *` a command and its arguments, `*` any text, else the command exactly; a
    command that chains, pipes or redirects only by a rule that names it whole."""
    assert (matching_rule([rule], "command", tool, command(text)) == rule) is allowed


@pytest.mark.parametrize(("rule", "tool", "files", "allowed"), [
    ("Edit", "Write", ["/w/a.py"], True),
    ("edit", "apply_patch", ["/w/a.py", "/w/b.py"], True),
    ("file_change", "edit", ["/w/a.py"], True),
    ("Edit(*.md)", "Edit", ["/w/docs/a.md"], True),
    ("Edit(*.md)", "Edit", ["/w/docs/a.md", "/w/a.py"], False),
    ("Edit(docs/*)", "edit", ["/w/docs/a/b.md"], True),
    ("Edit(docs/*)", "edit", ["/w/src/a.md"], False),
    ("Edit(/w/*)", "apply_patch", ["/w/a"], True),
    ("Edit(/w/*)", "apply_patch", ["/etc/passwd"], False),
    ("Edit(/w/*)", "apply_patch", ["/w/../etc/passwd"], False),
    ("Write", "Write", ["/w/a"], True),
    ("Write", "Edit", ["/w/a"], False),
    ("Bash", "Edit", ["/w/a"], False),
])
def test_a_file_rule_allows_a_change_only_when_every_file_matches(rule: str, tool: str, files: list[str],
                                                                  allowed: bool) -> None:
    detail = {"files": files, "diff_summary": "+1 -0"}
    assert (matching_rule([rule], "file_change", tool, detail) == rule) is allowed


def test_another_tool_is_matched_by_its_name_and_an_mcp_server_by_its_prefix() -> None:
    assert matching_rule(["mcp__github"], "tool", "mcp__github__create_issue", {}) == "mcp__github"
    assert matching_rule(["mcp__github__create_issue"], "tool", "mcp__github__create_issue", {}) is not None
    assert matching_rule(["mcp__git"], "tool", "mcp__github__create_issue", {}) is None
    assert matching_rule(["webfetch(https://docs.example/*)"], "tool", "webfetch",
                         {"patterns": ["https://docs.example/a"]}) is not None
    assert matching_rule(["webfetch(https://docs.example/*)"], "tool", "webfetch",
                         {"patterns": ["https://evil.example/a"]}) is None
    assert matching_rule(["Bash", "edit"], "tool", "webfetch", {}) is None


def test_the_first_matching_rule_is_the_one_named() -> None:
    rules = ["Edit", "Bash(git diff:*)", "Bash"]
    assert matching_rule(rules, "command", "Bash", command("git diff HEAD")) == "Bash(git diff:*)"


@pytest.mark.parametrize("bad", ["", "   ", "Bash(", "Bash()", "Bash(git status", "(ls)", "9lives", "Bash (ls)",
                                 "x" * 501])
def test_a_rule_that_is_not_one_is_refused_naming_it_and_what_is_allowed(bad: str) -> None:
    with pytest.raises(errors.InvalidArguments) as caught:
        check_rules(["Bash(ls *)", bad])
    assert (caught.value.code, caught.value.field, caught.value.allowed) == ("invalid_arguments", "allow",
                                                                             RULE_ALLOWED)
    assert repr(bad[:80]) in caught.value.message


def test_rules_are_kept_stripped_once_each_in_order_and_at_most_64() -> None:
    assert check_rules([" Bash(ls *) ", "edit", "Bash(ls *)"]) == ["Bash(ls *)", "edit"]
    with pytest.raises(errors.InvalidArguments):
        check_rules([f"Bash(echo {i})" for i in range(MAX_RULES + 1)])
