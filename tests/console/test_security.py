"""The console's login and security model (docs/reliability.md rows W1-W9), against a real app with its console: a
one-time login URL, an HttpOnly SameSite=Strict session cookie, Origin and CSRF checks on every change, loopback
Host names only, no secret in any log, and text from agents rendered inert in a real browser."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.conftest import AppProcess
from tests.console.conftest import ConsoleApp, console_through_a_recording_browser, log_in, shoot
from wardian import errors
from wardian.console import login_page
from wardian.console.auth import LOGIN_TTL_MS, SESSION_TTL_MS, ConsoleAuth

pytestmark = pytest.mark.timeout(300)

XSS = ('<script>window.__xss = "script ran"</script><img src="x" onerror="window.__xss = \'onerror ran\'">'
       '<svg onload="window.__xss = \'svg ran\'"></svg><a href="javascript:window.__xss=1">link</a> & "quotes"')


def _form(csrf: str | None, **fields: str) -> bytes:
    if csrf is not None:
        fields["csrf"] = csrf
    return urllib.parse.urlencode(fields).encode()


def _post(console: ConsoleApp, path: str, body: bytes, cookie: str | None, origin: str | None,
          **headers: str) -> tuple[int, dict[str, str], bytes]:
    h = {"Content-Type": "application/x-www-form-urlencoded", **headers}
    if cookie is not None:
        h["Cookie"] = cookie
    if origin is not None:
        h["Origin"] = origin
    return console.http("POST", path, h, body)


# --- logging in ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/agents", "/exchange", "/act", "/requests/ask_0", "/events/agents",
                                  "/events/exchange", "/events/requests/ask_0"])
def test_without_a_session_cookie_every_page_and_stream_is_401(shared_console_app: ConsoleApp, path: str) -> None:
    status, _, body = shared_console_app.http("GET", path)
    assert status == 401
    assert b"wardian console" in body  # how to get a login URL


def test_the_401_page_says_how_to_get_a_login_url(shared_console_app: ConsoleApp, context: Any,
                                                  evidence: Path) -> None:
    page = context.new_page()
    response = page.goto(shared_console_app.base + "/agents")
    assert response is not None
    assert response.status == 401
    help_ = page.locator("#login-help")
    expect(help_).to_contain_text("You are not logged in")
    expect(help_.locator("pre.command").first).to_have_text("wardian console")
    expect(help_).to_contain_text("ssh -L 8765:127.0.0.1:8765")
    shoot(page, evidence, "login-help")


def test_a_login_url_works_once(shared_console_app: ConsoleApp, browser: Any, evidence: Path) -> None:
    """The one-time token becomes a session in the first browser; the same URL opened again is refused (401) with the
    page that says how to get a new one, and opens no session."""
    url = shared_console_app.login_url()
    first = browser.new_context()
    second = browser.new_context()
    try:
        page = first.new_page()
        page.goto(url, wait_until="commit")
        page.wait_for_url("**/agents")
        expect(page.locator("h1")).to_have_text("Agents")
        again = second.new_page()
        response = again.goto(url)
        assert response is not None
        assert response.status == 401
        expect(again.locator("#login-help")).to_have_attribute("data-reason", "spent")
        expect(again.locator("#login-help")).to_contain_text("does not work any more")
        assert second.cookies() == []
        response = again.goto(shared_console_app.base + "/agents")
        assert response is not None
        assert response.status == 401
        shoot(again, evidence, "login-reused")
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("token", ["", "wcl1_forged", "x" * 500, "wcs1_notaloginatall"])
def test_a_forged_or_missing_login_token_opens_no_session(shared_console_app: ConsoleApp, token: str) -> None:
    status, headers, _ = shared_console_app.http("GET", "/login?" + urllib.parse.urlencode({"token": token}))
    assert status == 401
    assert "set-cookie" not in headers


def test_the_session_cookie_is_httponly_and_samesite_strict(shared_console_app: ConsoleApp, context: Any) -> None:
    url = urllib.parse.urlsplit(shared_console_app.login_url())
    status, headers, _ = shared_console_app.http("GET", f"{url.path}?{url.query}")
    assert status == 200
    attributes = [a.strip().lower() for a in headers["set-cookie"].split(";")]
    assert "httponly" in attributes
    assert "samesite=strict" in attributes
    assert "path=/" in attributes
    assert f"max-age={SESSION_TTL_MS // 1000}" in attributes
    page = context.new_page()
    log_in(page, shared_console_app)
    assert page.evaluate("document.cookie") == ""  # no script can read it
    [cookie] = context.cookies()
    assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")


def test_every_page_carries_the_security_headers(shared_console_app: ConsoleApp) -> None:
    cookie = shared_console_app.login_cookie()
    for path in ("/agents", "/exchange", "/act", "/static/console.js"):
        status, headers, _ = shared_console_app.http("GET", path, {"Cookie": cookie})
        assert status == 200, path
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "default-src 'none'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"


def test_logging_out_ends_the_session(shared_console_app: ConsoleApp) -> None:
    cookie = shared_console_app.login_cookie()
    csrf = shared_console_app.csrf(cookie)
    status, headers, _ = _post(shared_console_app, "/logout", _form(csrf), cookie, shared_console_app.base)
    assert (status, headers["location"]) == (303, "/logged-out")
    assert "max-age=0" in headers["set-cookie"].lower()
    assert shared_console_app.http("GET", "/agents", {"Cookie": cookie})[0] == 401


# --- changes need the Origin and the CSRF token -------------------------------------------------------------------


@pytest.fixture(scope="module")
def target(shared_console_app: ConsoleApp) -> ConsoleApp:
    shared_console_app.app.call("agent/add", {"name": "victim", "provider": "codex"})
    return shared_console_app


@pytest.mark.parametrize(("case", "origin", "with_csrf", "status"), [
    ("wrong-origin", "http://evil.example", True, 403),
    ("another-loopback-port", "http://127.0.0.1:1", True, 403),
    ("null-origin", "null", True, 403),
    ("no-origin", None, True, 403),
    ("no-csrf-token", "SELF", False, 403),
    ("wrong-csrf-token", "SELF", "forged", 403),
])
def test_a_post_without_its_origin_or_csrf_token_is_refused_and_changes_nothing(
        target: ConsoleApp, case: str, origin: str | None, with_csrf: bool | str, status: int) -> None:
    cookie = target.login_cookie()
    csrf = target.csrf(cookie)
    token = csrf if with_csrf is True else (with_csrf or None)
    before = target.records()
    for path, fields in (("/act/send", {"target": "victim", "kind": "task", "text": "run this"}),
                         ("/act/interrupt", {"target": "victim"}), ("/act/stop", {"agent": "victim"}),
                         ("/logout", {})):
        got, _, body = _post(target, path, _form(token, **fields), cookie, target.base if origin == "SELF" else origin)
        assert got == status, (path, got)
        assert b"nothing was changed" in body
    assert target.records() == before
    assert target.http("GET", "/agents", {"Cookie": cookie})[0] == 200  # logout was refused too


def test_a_post_without_a_session_is_401_and_changes_nothing(target: ConsoleApp) -> None:
    before = target.records()
    got, _, _ = _post(target, "/act/send", _form("whatever", target="victim", kind="task", text="x"), None,
                      target.base)
    assert got == 401
    assert target.records() == before


def test_a_cross_site_fetch_is_refused(target: ConsoleApp) -> None:
    """A browser's Sec-Fetch-Site marks a request another site made; even with a guessed token it is refused."""
    cookie = target.login_cookie()
    csrf = target.csrf(cookie)
    before = target.records()
    got, _, _ = _post(target, "/act/send", _form(csrf, target="victim", kind="task", text="x"), cookie, target.base,
                      **{"Sec-Fetch-Site": "cross-site"})
    assert got == 403
    assert target.records() == before


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.nip.io", "192.168.1.10", ""])
def test_only_loopback_host_names_are_served(shared_console_app: ConsoleApp, host: str) -> None:
    """A DNS-rebinding page (another name resolving to 127.0.0.1) never reaches a page."""
    cookie = shared_console_app.login_cookie()
    status, _, _ = shared_console_app.http("GET", "/agents", {"Host": host, "Cookie": cookie})
    assert status == 400


def test_a_form_over_the_size_limit_is_refused_unread(target: ConsoleApp) -> None:
    cookie = target.login_cookie()
    before = target.records()
    status, _, _ = _post(target, "/act/send", b"x", cookie, target.base, **{"Content-Length": str(10 * 1024 * 1024)})
    assert status == 413  # refused before the body is read
    csrf = target.csrf(cookie)
    big = _form(csrf, target="victim", kind="task", text="y" * (600 * 1024))
    status, _, _ = _post(target, "/act/send", big, cookie, target.base)
    assert status == 413
    assert target.records() == before


# --- the browser is opened on a private page, never on the login URL (W9) -------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_another_user_cannot_read_the_login_page(console_app: ConsoleApp, tmp_path: Path) -> None:
    """W9: the page the browser is opened on holds the login; another uid cannot read it, even with the home and its
    run/ opened for others to pass through (the page itself is 0600)."""
    _, record = console_through_a_recording_browser(console_app, tmp_path, log_in=False)
    assert "error" not in record, record
    page = Path(record["page"]["path"])
    home = console_app.app.home
    assert b"wcl1_" in page.read_bytes()  # not used yet: it still holds the login
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(page)]
    default = subprocess.run(as_nobody, capture_output=True, timeout=30, check=False)
    root_mode = stat.S_IMODE(os.stat(home.root).st_mode)
    os.chmod(home.root, 0o711)
    os.chmod(home.run_dir, 0o711)
    try:
        opened = subprocess.run(as_nobody, capture_output=True, timeout=30, check=False)
    finally:
        os.chmod(home.run_dir, 0o700)
        os.chmod(home.root, root_mode)
    for proc in (default, opened):
        assert proc.returncode != 0
        assert proc.stdout == b""
        assert b"Permission denied" in proc.stderr
    url = urllib.parse.urlsplit(record["login_url"])
    assert console_app.http("GET", f"{url.path}?{url.query}")[0] == 200  # nobody used it: still the owner's


def test_a_real_browser_opened_on_the_login_page_is_logged_in(console_app: ConsoleApp, browser: Any, tmp_path: Path,
                                                              evidence: Path) -> None:
    """W9: chromium opened on the `file://` page `wardian console` gave its browser follows it to the login and lands
    on the agents page with its session (a SameSite=Strict cookie set by a navigation from a file); the page is gone."""
    _, record = console_through_a_recording_browser(console_app, tmp_path, log_in=False)
    assert "error" not in record, record
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(record["argv"][1], wait_until="commit")
        page.wait_for_url(re.compile(r".*/agents$"))
        expect(page.locator("h1")).to_have_text("Agents")
        [cookie] = context.cookies()
        assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")
        shoot(page, evidence, "logged-in-through-the-page")
    finally:
        context.close()
    assert not Path(record["page"]["path"]).exists()


def test_a_login_page_is_written_only_as_a_new_private_file(tmp_path: Path) -> None:
    """W9: the page is created 0600 whatever the umask; a name that exists (a planted link included) is refused, never
    followed or replaced; a run/ others may enter gets no page (unit, on a real directory)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    url = "http://127.0.0.1:8765/login?token=wcl1_" + "A" * 43
    old_umask = os.umask(0o777)
    try:
        page = login_page.write_page(run_dir, url)
    finally:
        os.umask(old_umask)
    assert page == login_page.page_path(run_dir, "wcl1_" + "A" * 43)
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert f'content="0;url={url}"' in page.read_text(encoding="utf-8")
    page.unlink()
    target = tmp_path / "target"
    target.write_text("theirs", encoding="utf-8")
    page.symlink_to(target)
    with pytest.raises(FileExistsError):
        login_page.write_page(run_dir, url)
    assert page.is_symlink()
    assert target.read_text(encoding="utf-8") == "theirs"
    open_run = tmp_path / "open"
    open_run.mkdir()
    os.chmod(open_run, 0o755)
    with pytest.raises(errors.InsecureRuntimeDir) as caught:
        login_page.write_page(open_run, url)
    assert caught.value.code == "insecure_runtime_dir"
    assert list(open_run.iterdir()) == []


# --- no secret in logs ---------------------------------------------------------------------------------------------


def test_no_login_token_or_session_cookie_appears_in_any_log(console_app: ConsoleApp, context: Any) -> None:
    page = context.new_page()
    log_in(page, console_app)
    url = urllib.parse.urlsplit(console_app.login_url())
    secret = urllib.parse.parse_qs(url.query)["token"][0]
    assert console_app.http("GET", f"{url.path}?{url.query}")[0] == 200  # spent now
    assert console_app.http("GET", f"{url.path}?{url.query}")[0] == 401  # and refused
    assert console_app.http("GET", f"/login?token={secret}x")[0] == 401
    [cookie] = context.cookies()
    home = console_app.app.home.root
    console_app.app.call("app/stop")
    console_app.app.proc.wait(timeout=30)
    assert isinstance(console_app.app.proc, AppProcess)
    stderr = console_app.app.proc.stderr_output()
    texts = [stderr] + [p.read_bytes() for p in home.rglob("*") if p.is_file() and p.suffix in (".log", ".out")]
    assert texts
    for text in texts:
        assert b"wcl1_" not in text
        assert b"wcs1_" not in text
        assert cookie["value"].encode() not in text
        assert secret.encode() not in text


def test_login_tokens_expire_and_sessions_end() -> None:
    """Unit: a login token is valid for LOGIN_TTL_MS and once; a session for SESSION_TTL_MS."""
    now = [1_000_000]
    auth = ConsoleAuth(clock=lambda: now[0])
    token, expires = auth.mint_login()
    assert expires == now[0] + LOGIN_TTL_MS
    now[0] = expires
    assert auth.redeem(token) is None  # expired at its deadline
    token, _ = auth.mint_login()
    redeemed = auth.redeem(token)
    assert redeemed is not None
    assert auth.redeem(token) is None  # once
    cookie, session = redeemed
    assert auth.session(cookie) == session
    assert session.csrf_matches(session.csrf)
    assert not session.csrf_matches(session.csrf + "x")
    assert not session.csrf_matches(None)
    now[0] = session.expires_at
    assert auth.session(cookie) is None


# --- text from agents is data ---------------------------------------------------------------------------------------


def test_html_in_a_message_renders_as_text_and_runs_nothing(console_app: ConsoleApp, context: Any,
                                                            evidence: Path) -> None:
    """An XSS probe in a message (a script element, an img onerror, an svg onload, a javascript: link) shows as text
    in the exchange, in the request view and when it arrives live over the stream; no script of it runs."""
    app = console_app.app
    _, lead = app.add_agent("lead")
    app.add_agent("worker")
    early = app.call("task/followup", {"session": lead, "target": "worker", "message": XSS})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, console_app)
    page.goto(console_app.base + "/exchange")
    row = page.locator(f'#exchange tr[data-key="{early["request_id"]}"]')
    expect(row.locator(".body")).to_have_text(XSS)
    # Live: the same text arriving over the stream is inert too.
    late = app.call("message/send", {"session": lead, "target": "worker", "message": XSS})
    live_row = page.locator(f'#exchange tr[data-key="{late["interaction_id"]}"]')
    expect(live_row.locator(".body")).to_have_text(XSS)
    shoot(page, evidence, "exchange-xss")
    _assert_inert(page)
    page.goto(console_app.base + f"/requests/{early['request_id']}")
    expect(page.locator("#text")).to_have_text(XSS)
    _assert_inert(page)
    shoot(page, evidence, "request-xss")
    assert errors == []


def _assert_inert(page: Any) -> None:
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("main img").count() == 0
    assert page.locator("main svg[onload]").count() == 0
    assert page.locator("main a[href^='javascript:']").count() == 0
    # The only script is the console's own, from its origin.
    assert page.evaluate("[...document.scripts].map(s => new URL(s.src).pathname)") == ["/static/console.js"]
