"""The private page `wardian console` opens a browser on, instead of the login URL (docs/guide/console.md, "Logging
in, and the security model").

A browser is started as `PROGRAM URL`, and every local user can read a process's arguments (`/proc/PID/cmdline`),
so the one-time login URL never goes there: the CLI writes it into a page in the home's `run/` (0700), and opens the
browser on that file's `file://` URL, which holds no secret; the page forwards the browser to the login URL. Jupyter
opens its browser the same way (`_write_browser_open_file` in https://github.com/jupyter-server/jupyter_server).

- A page is created 0600 with O_CREAT|O_EXCL: an existing name, a planted symlink included, fails the open and is
  never followed or replaced. It is written only into a `run/` of this user's that nobody else may enter.
- Its name is derived from the login token's SHA-256 (which gives nothing of the token away), so the app removes the
  page when the login is redeemed; `wardian console` removes pages older than a login's life before it writes one,
  and a console removes all of them when it starts (an app's logins end with it).
- Standard library only, and light: the CLI imports it.
"""

from __future__ import annotations

import hashlib
import html
import os
import stat
import time
from contextlib import suppress
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from wardian import errors

PREFIX = "console-login-"
SUFFIX = ".html"


def page_path(run_dir: Path, token: str) -> Path:
    """Where the page of the login token `token` is (it may not exist)."""
    digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return run_dir / f"{PREFIX}{digest}{SUFFIX}"


def write_page(run_dir: Path, url: str) -> Path:
    """Write the page that forwards a browser to the login URL `url`; its path.

    Raises:
        InsecureRuntimeDir: `run_dir` is not a directory of this user's that only this user may enter.
        OSError: the page cannot be created (its name exists, the disk is full, ...); nothing is left behind.
    """
    _check_private(run_dir)
    path = page_path(run_dir, _token_of(url))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask: the browser, running as this user, must be able to read it
        with os.fdopen(fd, "w", encoding="utf-8", closefd=False) as f:
            f.write(_page(url))
    except BaseException:
        with suppress(OSError):
            os.unlink(path)
        raise
    finally:
        os.close(fd)
    return path


def remove_page(run_dir: Path, token: str) -> None:
    """Remove the page of the login token `token`, if there is one.

    Raises: OSError (other than a missing page).
    """
    with suppress(FileNotFoundError):
        os.unlink(page_path(run_dir, token))


def remove_pages(run_dir: Path, older_than_ms: int = 0) -> list[Path]:
    """Remove the pages in `run_dir` last written more than `older_than_ms` ago (all of them with 0); the removed.

    Raises: OSError (`run_dir` cannot be listed, other than a missing one).
    """
    removed: list[Path] = []
    cutoff_ns = time.time_ns() - older_than_ms * 1_000_000
    try:
        names = os.listdir(run_dir)
    except FileNotFoundError:
        return removed
    for name in names:
        if not (name.startswith(PREFIX) and name.endswith(SUFFIX)):
            continue
        path = run_dir / name
        with suppress(FileNotFoundError):  # a concurrent `wardian console`, or the app, removed it first
            if older_than_ms == 0 or os.lstat(path).st_mtime_ns <= cutoff_ns:
                os.unlink(path)  # a link of that name is removed itself, never what it points to
                removed.append(path)
    return removed


def _token_of(url: str) -> str:
    """The login token in `url`; the whole URL if it names none (its page then waits for removal by age)."""
    return parse_qs(urlsplit(url).query).get("token", [url])[0]


def _check_private(run_dir: Path) -> None:
    """Raises: InsecureRuntimeDir (what the app itself refuses at its start, found here since)."""
    st = os.lstat(run_dir)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise errors.InsecureRuntimeDir(
            f"{run_dir} is not a directory only this user may enter (mode {stat.S_IMODE(st.st_mode):o}, owner uid "
            f"{st.st_uid}), so the login page is not written there; run `wardian console --no-open` and open the "
            "URL it prints yourself", field="home", allowed="a run/ directory of this user's with mode 700")


def _page(url: str) -> str:
    # A refresh, not a script: it works with scripts off, and a text browser shows the link. The page is a file, so
    # it sends no Referer to the console.
    target = html.escape(url, quote=True)
    return ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"referrer\" content=\"no-referrer\">\n"
            f"<meta http-equiv=\"refresh\" content=\"0;url={target}\">\n"
            "<title>Logging in · wardian console</title>\n</head>\n<body>\n"
            f"<p>Logging in to the wardian console… If nothing happens, <a href=\"{target}\">continue</a>.</p>\n"
            "</body>\n</html>\n")
