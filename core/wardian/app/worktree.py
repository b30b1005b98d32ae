"""The git side of an agent's worktree (docs/guide/teams.md#a-worktree-per-agent): making it, or finding it made;
reading its branch, commits ahead and changes; removing it when clean. It never deletes work: a worktree with changes
is refused, and a branch is deleted only when wardian made it and its base holds every commit of it.

Blocking (the app calls these through `anyio.to_thread.run_sync`). git is the real `git` on the app's PATH, run with
an argv list (no shell), a bounded timeout, and an environment without the app's own `GIT_*` variables: a `GIT_DIR`
or `GIT_WORK_TREE` inherited from the person's shell would point every command at another repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wardian import errors
from wardian.store.worktrees import Worktree

READ_TIMEOUT_S = 20.0
"""A read (status, rev-list, worktree list) of a large repository still answers well within this."""
STATE_TIMEOUT_S = 5.0
"""A read for `wardian status`: past it the worktree is shown `unknown`, so a slow disk never holds up the page."""
ADD_TIMEOUT_S = 300.0
"""`git worktree add` checks out the whole tree (and runs the repository's post-checkout hook)."""
MAX_LISTED = 50
"""The changed files a refusal lists by name (all are counted)."""
MAX_GIT_MESSAGE = 500
StateName = Literal["clean", "dirty", "missing", "unknown"]


@dataclass(frozen=True, slots=True)
class Made:
    repo: str
    """The repository's top folder."""
    base: str | None
    made_branch: bool
    reused: bool
    """The worktree existed already, on its branch: nothing was made."""


@dataclass(frozen=True, slots=True)
class State:
    state: StateName
    ahead: int | None = None
    changed: tuple[str, ...] = ()
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """One worktree of `git worktree list --porcelain`."""

    path: str
    branch: str | None
    prunable: bool


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    # No prompt for credentials (nothing here talks to a remote), and a status that takes no lock an agent's own git
    # command would then find held.
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    return env


def git(args: list[str], cwd: Path | str, timeout_s: float = READ_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """`git -C cwd ARGS`, bounded.

    Raises: GitNotFound; GitFailed (no answer within `timeout_s`, or it could not run).
    """
    env = git_env()
    exe = shutil.which("git", path=env.get("PATH"))
    if exe is None:
        raise errors.GitNotFound("no `git` on the app's PATH: install git (a worktree is made by git)",
                                 field="worktree", allowed="git on the app's PATH")
    try:
        return subprocess.run([exe, "-C", str(cwd), *args], capture_output=True, text=True, encoding="utf-8",
                              errors="replace", timeout=timeout_s, check=False, stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        raise errors.GitFailed(f"git {args[0]} in {cwd} did not answer within {timeout_s:.0f} s",
                               field="worktree") from None
    except OSError as exc:
        raise errors.GitFailed(f"git cannot run: {exc}", field="worktree") from None


def _checked(done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip())[:MAX_GIT_MESSAGE]
        raise errors.GitFailed(f"git could not {what}: {said}", field="worktree")
    return done.stdout


def toplevel(repo: Path) -> Path:
    """The top folder of the work tree holding `repo`.

    Raises: NotAGitRepository; GitNotFound; GitFailed.
    """
    if not repo.is_dir():
        raise errors.NotAGitRepository(f"{repo} is not a folder", field="worktree.repo",
                                       allowed="a folder of a git repository's work tree")
    done = git(["rev-parse", "--show-toplevel"], repo)
    top = done.stdout.strip()
    if done.returncode != 0 or not top:
        raise errors.NotAGitRepository(f"{repo} is not in a git work tree: {done.stderr.strip()[:200]}",
                                       field="worktree.repo", allowed="a folder of a git repository's work tree")
    return Path(top)


def entries(top: Path) -> list[Entry]:
    out = _checked(git(["worktree", "list", "--porcelain", "-z"], top), "list the repository's worktrees")
    found: list[Entry] = []
    for block in out.split("\0\0"):
        fields = [f for f in block.split("\0") if f]
        if not fields or not fields[0].startswith("worktree "):
            continue
        branch = next((f.removeprefix("branch refs/heads/") for f in fields if f.startswith("branch refs/heads/")),
                      None)
        found.append(Entry(fields[0].removeprefix("worktree "), branch, any(f.startswith("prunable") for f in fields)))
    return found


def _same(a: str | Path, b: str | Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _base_of(top: Path) -> str | None:
    """The repository's current branch, else its current commit; None for a repository without one."""
    branch = git(["symbolic-ref", "--quiet", "--short", "HEAD"], top)
    if branch.returncode == 0 and branch.stdout.strip():
        return branch.stdout.strip()
    commit = git(["rev-parse", "--verify", "--quiet", "HEAD"], top)
    return commit.stdout.strip() or None if commit.returncode == 0 else None


def ensure(repo: Path, branch: str, path: Path, base: str | None = None) -> Made:
    """The worktree of `repo` on `branch` at `path`: found there already (reused), else made, on the existing
    branch or on a new one from the repository's current commit. `base`: the one recorded when it was first made.

    Raises: NotAGitRepository; BranchCheckedOut (another worktree has the branch); WorktreePathTaken (`path`
        exists and is not that worktree); GitNotFound; GitFailed. Nothing is created when one is raised.
    """
    top = toplevel(repo)
    listed = entries(top)
    mine = next((e for e in listed if _same(e.path, path)), None)
    if os.path.lexists(path):
        if mine is not None and not mine.prunable and mine.branch == branch:
            return Made(str(top), base or _base_of(top), made_branch=False, reused=True)
        what = (f"a worktree of {top} on {mine.branch or 'a detached HEAD'}" if mine is not None else
                "not a worktree of this repository")
        raise errors.WorktreePathTaken(f"{path} exists and is {what}; the agent's worktree must be made there on "
                                       f"{branch}: move it away, or give the agent another name", field="worktree",
                                       path=str(path))
    holders = [e for e in listed if e.branch == branch]
    if held := [e for e in holders if not e.prunable]:
        raise errors.BranchCheckedOut(f"branch {branch} is checked out in {held[0].path}; a branch can be checked "
                                      "out in one worktree only: name another branch (worktree = \"BRANCH\", or "
                                      "--worktree BRANCH)", field="worktree.branch", where=held[0].path)
    exists = git(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], top).returncode == 0
    base = base or _base_of(top)
    # --force only overrides what git keeps of a worktree whose folder is gone (`prunable`): the one at `path`, or
    # another that had this branch.
    force = ["--force"] if mine is not None or holders else []
    args = ["worktree", "add", *force, str(path), branch] if exists else \
        ["worktree", "add", *force, "-b", branch, str(path), "HEAD"]
    _checked(git(args, top, ADD_TIMEOUT_S), f"make the worktree {path} on {branch}")
    return Made(str(top), base, made_branch=not exists, reused=False)


def changes(path: Path, timeout_s: float = READ_TIMEOUT_S) -> tuple[str, list[str]]:
    """The worktree's checked-out branch (`HEAD` when detached) and its changed, added or untracked paths."""
    args = ["status", "--porcelain", "-z", "-b", "--no-renames", "--untracked-files=normal"]
    out = _checked(git(args, path, timeout_s), f"read the state of {path}")
    fields = [f for f in out.split("\0") if f]
    head = fields[0][3:] if fields and fields[0].startswith("## ") else ""
    branch = head.split("...")[0].removeprefix("No commits yet on ")
    return ("HEAD" if branch.startswith("HEAD (no branch)") else branch), [f[3:] for f in fields[1:]]


def state(path: Path, base: str | None) -> State:
    """What `wardian status` shows of a worktree; never raises: git's failure is `unknown` with its reason."""
    if not os.path.lexists(path):
        return State("missing", reason="no worktree at this path: the agent's next start makes it again")
    try:
        _, changed = changes(path, STATE_TIMEOUT_S)
        ahead = None
        if base is not None:
            done = git(["rev-list", "--count", f"{base}..HEAD"], path, STATE_TIMEOUT_S)
            ahead = int(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip().isdigit() else None
    except errors.WardianError as exc:
        return State("unknown", reason=exc.message)
    return State("dirty" if changed else "clean", ahead, tuple(changed))


@dataclass(frozen=True, slots=True)
class Removed:
    removed: bool
    branch_deleted: bool
    note: str | None


def check_clean(path: Path) -> None:
    """Raises: WorktreeDirty (listing the changed paths); GitNotFound; GitFailed."""
    if not os.path.lexists(path):
        return
    _, changed = changes(path)
    if changed:
        shown = ", ".join(changed[:MAX_LISTED]) + (f" and {len(changed) - MAX_LISTED} more"
                                                    if len(changed) > MAX_LISTED else "")
        raise errors.WorktreeDirty(f"the worktree {path} has {len(changed)} changed file(s): {shown}; nothing was "
                                   "removed: commit or discard them first", field="remove_worktree",
                                   changed=changed[:MAX_LISTED], count=len(changed), path=str(path))


def remove(path: Path, repo: str, branch: str, base: str | None, made_branch: bool) -> Removed:
    """Remove the clean worktree at `path` (git refuses a dirty one itself, should it have changed since
    `check_clean`), then its branch when wardian made it and `base` holds all of it.

    Raises: WorktreeDirty; GitNotFound; GitFailed.
    """
    check_clean(path)
    if os.path.lexists(path):
        _checked(git(["worktree", "remove", str(path)], repo), f"remove the worktree {path}")
    if not made_branch:
        return Removed(True, False, f"branch {branch} was not made by wardian: kept")
    if base is None:
        return Removed(True, False, f"branch {branch} kept: its base is unknown")
    merged = git(["merge-base", "--is-ancestor", f"refs/heads/{branch}", base], repo)
    if merged.returncode != 0:
        return Removed(True, False, f"branch {branch} kept: it has commits {base} lacks")
    _checked(git(["branch", "-D", branch], repo), f"delete the branch {branch}")
    return Removed(True, True, None)


def prepare(workspace: Path, record: Worktree | None) -> None:
    """Make the folder an agent starts in: its worktree on its branch when it has one (made again when gone: a
    person removed it, or `worktree/remove` did), else its plain workspace.

    Raises: what `ensure` raises, for a worktree.
    """
    if record is None:
        workspace.mkdir(parents=True, exist_ok=True)
    else:
        ensure(Path(record.repo), record.branch, workspace, record.base)
