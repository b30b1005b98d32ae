"""Fixtures of the web console's tests (docs/guide/console.md): a real `wardian app run --console` on a fresh home, real
Codex agents on the scripted model, and Debian's chromium driven by Playwright.

The browser is the system's `/usr/bin/chromium` (Playwright's own download is not reachable from our machines). When
it is missing the browser tests are skipped with the reason, except on CI (`CI` set), where they fail.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import pytest

from tests.conftest import AppHandle, AppProcess, app_on_a_fresh_home, unavailable, wardian_cmd
from tests.providers.codex.conftest import CodexWorld, codex_or_skip
from wardian_harness.models.scripted_model import ScriptedModel
from wardian_harness.processes import apps

CHROMIUM = Path(os.environ.get("WARDIAN_TEST_CHROMIUM", "/usr/bin/chromium"))
# Bounded waits on conditions: a real Codex starting on a loaded 2-core machine takes seconds, not Playwright's 5.
EXPECT_TIMEOUT_MS = 60_000
REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "dist" / "console-evidence"
RECORDING_BROWSER = Path(__file__).with_name("recording_browser.py")


def start_console_app(root: Path, extra_env: dict[str, str] | None = None,
                      address: str = "127.0.0.1:0") -> AppProcess:
    """`wardian app run --console ADDRESS` on `root`, returned once it accepts calls (the product's start helper)."""
    proc = apps.start(root, env=apps.app_env(extra_env), command=wardian_cmd(), extra_args=("--console", address))
    return cast(AppProcess, proc)  # no stderr file and no spawn given: the harness drains it (an AppProcess)


@contextmanager
def console_app_on_a_fresh_home(prefix: str, extra_env: dict[str, str] | None = None) -> Iterator[AppHandle]:
    """An app with its console on a free loopback port, on a fresh home; stopped (and its home removed) after."""
    with app_on_a_fresh_home(prefix=prefix, extra_env=extra_env, extra_args=("--console", "127.0.0.1:0")) as handle:
        yield handle


@dataclass
class ConsoleApp:
    """A running app with its console, and how to reach it."""

    app: AppHandle

    @property
    def base(self) -> str:
        return str(self.app.call("app/status")["console"])

    @property
    def port(self) -> int:
        return int(urlsplit(self.base).port or 0)

    def login_url(self) -> str:
        """A fresh one-time login URL, from `wardian console --no-open --json` (the operator's own command)."""
        proc = self.app.cli("console", "--no-open", "--json")
        assert proc.returncode == 0, proc.stderr
        return str(json.loads(proc.stdout)["url"])

    def login_cookie(self) -> str:
        """Log in over plain HTTP; the `name=value` of the session cookie."""
        url = urlsplit(self.login_url())
        status, headers, _ = self.http("GET", f"{url.path}?{url.query}")
        assert status == 200
        return headers["set-cookie"].split(";")[0]

    def http(self, method: str, path: str, headers: dict[str, str] | None = None,
             body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers={"Host": f"127.0.0.1:{self.port}", **(headers or {})})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def records(self) -> list[dict[str, Any]]:
        return list(self.app.call("mailbox/records", {"limit": 100_000})["records"])

    def csrf(self, cookie: str) -> str:
        status, _, body = self.http("GET", "/act", {"Cookie": cookie})
        assert status == 200
        found = re.search(rb'name="csrf" value="([^"]+)"', body)
        assert found is not None
        return found.group(1).decode()


def console_through_a_recording_browser(console: ConsoleApp, folder: Path, *,
                                        log_in: bool) -> tuple[subprocess.CompletedProcess[bytes], dict[str, Any]]:
    """`wardian console` with `BROWSER` set to tests/console/recording_browser.py (which logs in through what it was
    given when `log_in`): what the command printed and what the browser recorded."""
    program = folder / "browser"
    program.write_text(f"#!{sys.executable}\n" + RECORDING_BROWSER.read_text(encoding="utf-8"), encoding="utf-8")
    program.chmod(0o755)
    record = folder / "browser.json"
    env = console.app.env()
    env.update(BROWSER=str(program), RECORDING_BROWSER_OUT=str(record), RECORDING_BROWSER_LOGIN=str(int(log_in)))
    proc = subprocess.run([*wardian_cmd(), "console"], env=env, capture_output=True, timeout=90, check=False)
    assert proc.returncode == 0, proc.stderr
    assert record.exists(), proc.stdout  # the browser was started
    return proc, json.loads(record.read_text(encoding="utf-8"))


def _console_app(extra_env: dict[str, str] | None = None) -> Iterator[ConsoleApp]:
    with console_app_on_a_fresh_home("wk", extra_env) as handle:
        yield ConsoleApp(handle)


@pytest.fixture
def console_app() -> Iterator[ConsoleApp]:
    """A fresh app with its console on a free loopback port; stopped (and its home removed) after the test."""
    yield from _console_app()


@pytest.fixture(scope="module")
def shared_console_app() -> Iterator[ConsoleApp]:
    """One app with its console for a module; tests register agents of their own."""
    yield from _console_app()


@dataclass
class ConsoleWorld(CodexWorld):
    """A `CodexWorld` (real Codex on the scripted model) whose app serves the console."""

    console: ConsoleApp | None = None

    @property
    def web(self) -> ConsoleApp:
        assert self.console is not None
        return self.console


@pytest.fixture
def console_world() -> Iterator[ConsoleWorld]:
    codex = codex_or_skip()
    extra = {"WARDIAN_CODEX": str(codex), "WARDIAN_SCRIPTED_MODEL_KEY": "dummy-key"}
    with ScriptedModel() as model, console_app_on_a_fresh_home("wq", extra) as handle:
        yield ConsoleWorld(handle, model, codex, extra, ConsoleApp(handle))


# --- the browser -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is missing: run `scripts/setup.sh --with-system` to install Debian's chromium")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium: Path) -> Iterator[Any]:
    """A headless chromium for a test module, driven by Playwright.

    Module scope, not session: Playwright's sync API keeps an asyncio loop running in this thread (switching through
    greenlets) for as long as it is open, so another module's `anyio.run` (and even `ast.parse`, a CPython 3.11
    recursion-depth check) on the same xdist worker would fail. pytest closes it before a test of another module runs.
    """
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def evidence(request: pytest.FixtureRequest) -> Path:
    """This test's evidence folder (screenshots), under dist/ (never in git)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:120]
    folder = EVIDENCE / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A fresh browser context (its own cookies) whose pages fail a test on any script error."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    ctx.set_default_timeout(EXPECT_TIMEOUT_MS)
    try:
        yield ctx
    finally:
        ctx.close()


def log_in(page: Any, console: ConsoleApp) -> None:
    """Open a fresh one-time login URL; returns on the agents page."""
    # "commit": the login page moves on to /agents by itself at once; waiting for its load could race that.
    page.goto(console.login_url(), wait_until="commit")
    page.wait_for_url(re.compile(r".*/agents$"))


def shoot(page: Any, evidence: Path, name: str) -> Path:
    path = evidence / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
