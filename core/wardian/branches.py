"""A git branch name, checked as git checks it: an agent's worktree branch (`worktree = "BRANCH"`, `agent add
--worktree BRANCH`) is refused before git or the store is touched, by the team file and the app alike. Stdlib only:
`wardian init` and the team file's checks load it without the app's protocol."""

from __future__ import annotations

import re

from wardian import errors

MAX_BRANCH_CHARS = 200
BRANCH_PREFIX = "wardian/"
"""An agent's branch when none is named: `wardian/<agent name>`."""
BRANCH_ALLOWED = ("a git branch name (git check-ref-format --branch): no space, ~ ^ : ? * [ \\, no `..`, `//` or "
                  "`@{`, no part starting with `.` or ending with `.lock`, not starting with `-` or ending with `/` "
                  f"or `.`; at most {MAX_BRANCH_CHARS} characters")
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def check_branch(name: str, field: str = "worktree.branch") -> str:
    """`name` when git takes it as a branch name (the rules of git-check-ref-format(1) for `refs/heads/<name>`).

    Raises: InvalidArguments (naming `field`, with what is allowed).
    """
    parts = name.split("/")
    bad = (not name or len(name) > MAX_BRANCH_CHARS or _BAD_CHARS.search(name) is not None or ".." in name
           or "@{" in name or name in ("@", "HEAD") or name.startswith("-") or name.endswith(".")
           or any(not p or p.startswith(".") or p.endswith(".lock") for p in parts))
    if bad:
        raise errors.InvalidArguments(f"{name[:80]!r} is not a branch name git accepts", field=field,
                                      allowed=BRANCH_ALLOWED)
    return name


def default_branch(agent_name: str) -> str:
    return BRANCH_PREFIX + agent_name
