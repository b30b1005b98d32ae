"""A stand-in browser for `BROWSER` (Python's webbrowser runs `PROGRAM URL`): it records what it was started with (its
arguments, and the names of the environment variables that hold a login token: only names, so that no other secret
of the environment lands in a test report) and the page it was given, and, asked to, logs in the way a browser would:
it follows the page's refresh to the login URL, keeps the session cookie, and opens the agents page with it.

A program, not a module of the tests: `tests/console/conftest.py` copies it under a shebang of the tests' Python. It
writes its record (JSON) to the path in RECORDING_BROWSER_OUT; it logs in only when RECORDING_BROWSER_LOGIN=1.
Standard library only.
"""

from __future__ import annotations

import html
import http.cookiejar
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

TOKEN_PREFIX = "wcl1_"  # a console login token (wardian.console.auth.LOGIN_PREFIX)
REFRESH = re.compile(r'<meta http-equiv="refresh" content="0;url=([^"]+)">')


def _get(opener: urllib.request.OpenerDirector, url: str) -> int:
    try:
        with opener.open(url, timeout=30) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _log_in(record: dict[str, Any], login_url: str, page: Path) -> None:
    jar = http.cookiejar.CookieJar()
    # No proxy: the console is on loopback, and a proxy from the environment must not see the login.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(jar))
    record["login_status"] = _get(opener, login_url)
    parts = urllib.parse.urlsplit(login_url)
    record["agents_status"] = _get(opener, f"{parts.scheme}://{parts.netloc}/agents")
    record["cookies"] = [cookie.name for cookie in jar]
    record["page_left_after_login"] = page.exists()


def _holding(secret: str) -> list[str]:
    """The names of the environment variables whose name or value holds `secret`."""
    return [name for name, value in os.environ.items() if secret in name or secret in value]


def main() -> int:
    record: dict[str, Any] = {"argv": sys.argv, "environ_with_a_login": _holding(TOKEN_PREFIX)}
    try:
        opened = urllib.parse.urlsplit(sys.argv[1])
        record["scheme"] = opened.scheme
        page = Path(urllib.request.url2pathname(opened.path))
        st = page.stat()
        record["page"] = {"path": str(page), "mode": st.st_mode & 0o7777, "uid": st.st_uid}
        found = REFRESH.search(page.read_text(encoding="utf-8"))
        record["login_url"] = html.unescape(found.group(1)) if found else None
        if record["login_url"]:
            token = urllib.parse.parse_qs(urllib.parse.urlsplit(record["login_url"]).query)["token"][0]
            record["environ_with_a_login"] += _holding(token)
        if os.environ.get("RECORDING_BROWSER_LOGIN") == "1" and record["login_url"]:
            _log_in(record, record["login_url"], page)
    except Exception as exc:  # the record says what went wrong; the test fails on it
        record["error"] = repr(exc)
    Path(os.environ["RECORDING_BROWSER_OUT"]).write_text(json.dumps(record), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
