"""The web console (opt-in: `--only console`). (1) A committed record visible in a real browser: the app's receipt
of a send -> the row in the exchange page's DOM, carried by Server-Sent Events (chromium via Playwright,
/usr/bin/chromium). (2) The exchange page's first page at 1,000,000 records: the server's own time (its Server-Timing
header) and the client's round trip, unfiltered and filtered by agent."""

from __future__ import annotations

import contextlib
import http.client
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.apps import RunningApp, add_agents, bench_app, new_home
from benchmarks.config import QUICK, Config
from benchmarks.figures import emit, latency_fields, median_pct
from benchmarks.store import seed_store
from wardian.client import AppClient

# The wall-clock time (ms) at which each row entered the DOM, by record id.
_WATCH_ROWS = """() => {
    window.__arrived = {};
    const body = document.querySelector('#exchange tbody');
    new MutationObserver((changes) => {
        const now = performance.timeOrigin + performance.now();
        for (const c of changes) for (const n of c.addedNodes)
            if (n.dataset && !(n.dataset.key in window.__arrived)) window.__arrived[n.dataset.key] = now;
    }).observe(body, {childList: true});
}"""


@contextlib.contextmanager
def console_app(root: Path) -> Iterator[tuple[RunningApp, str]]:
    """An app serving its console on a free loopback port; with the console's base URL."""
    with bench_app(root, extra_args=("--console", "127.0.0.1:0"), timeout_s=120) as app, AppClient(app.home) as c:
        yield app, str(c.call("app/status")["console"])


def bench_console(cfg: Config) -> None:
    """The console's commit -> DOM latency, then its first exchange page at a million records."""
    _commit_to_dom(cfg)
    _first_page_at_1m(cfg)


def _commit_to_dom(cfg: Config) -> None:
    from playwright.sync_api import sync_playwright

    sends = 40 if cfg is QUICK else 200
    root = new_home()
    from_receipt: list[list[float]] = []
    from_call: list[list[float]] = []
    try:
        with console_app(root) as (app, base), AppClient(app.home) as client, sync_playwright() as pw:
            (_, lead), _ = add_agents(client, "lead", 1)[0], add_agents(client, "worker", 1)
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(client.call("console/login")["url"], wait_until="commit")
            page.wait_for_url("**/agents")
            page.goto(base + "/exchange")
            page.wait_for_function("document.getElementById('live').dataset.state === 'on'")
            page.evaluate(_WATCH_ROWS)
            for _ in range(cfg.rounds):
                receipt_samples, call_samples = _sends_to_rows(client, page, lead, sends)
                from_receipt.append(receipt_samples)
                from_call.append(call_samples)
            browser.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    p50 = median_pct(from_receipt, 0.5)
    p99 = median_pct(from_receipt, 0.99)
    emit("console_commit_to_dom", **latency_fields(from_receipt), unit="ms", target="p50_ms <= 100, p99_ms <= 250",
         met=p50 <= 100 and p99 <= 250, browser="chromium (Debian, headless) via Playwright",
         how="send receipt returned (record committed) -> its row added to the exchange page's DOM (SSE)",
         from_call_p50_ms=median_pct(from_call, 0.5),
         from_call_p99_ms=median_pct(from_call, 0.99))


def _sends_to_rows(client: AppClient, page: Any, lead: str, sends: int) -> tuple[list[float], list[float]]:
    """`sends` isolated sends, each timed to its row's arrival in the DOM: from the receipt, and from the call."""
    receipt_samples, call_samples = [], []
    for i in range(sends):
        time.sleep(0.06)  # an isolated commit: past the console's render interval (50 ms)
        t0 = time.time()
        rid = client.call("message/send", {"session": lead, "target": "worker0",
                                           "message": f"console {i}"})["interaction_id"]
        t1 = time.time()
        page.wait_for_function("id => id in window.__arrived", arg=rid, timeout=30_000)
        arrived = page.evaluate("id => window.__arrived[id]", rid) / 1000
        receipt_samples.append(arrived - t1)
        call_samples.append(arrived - t0)
    return receipt_samples, call_samples


class _Pages:
    """GETs over one keep-alive connection, each timed by the server (Server-Timing) and by this client."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def get(self, path: str, cookie: str = "") -> tuple[float, float, Any]:
        t0 = time.perf_counter()
        self.conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        response = self.conn.getresponse()
        body = response.read()
        took = time.perf_counter() - t0
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status} {body[:300]!r}")
        server = float(response.getheader("server-timing", "app;dur=nan").split("dur=")[1]) / 1000
        return server, took, response


def _first_page_at_1m(cfg: Config) -> None:
    from urllib.parse import urlsplit

    recipients, per = 100, cfg.records // 100
    root = new_home()
    try:
        seed_store(root, recipients, per)
        with console_app(root) as (app, _), AppClient(app.home) as client:
            url = urlsplit(client.call("console/login")["url"])
            pages = _Pages(int(url.port or 0))
            _, _, login = pages.get(f"{url.path}?{url.query}")
            cookie = login.getheader("set-cookie").split(";")[0]
            for case, path in (("", "/exchange"), ("_agent", "/exchange?agent=inbox7")):
                _page_rounds(cfg, pages, cookie, case, path, recipients * per)
            pages.conn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _page_rounds(cfg: Config, pages: _Pages, cookie: str, case: str, path: str, stored: int) -> None:
    for _ in range(20):  # warm-up
        pages.get(path, cookie)
    server_rounds, client_rounds = [], []
    for _ in range(cfg.rounds):
        server_samples, client_samples = [], []
        for _ in range(cfg.receives):
            server, took, _ = pages.get(path, cookie)
            server_samples.append(server)
            client_samples.append(took)
        server_rounds.append(server_samples)
        client_rounds.append(client_samples)
    p99 = median_pct(server_rounds, 0.99)
    emit(f"console_exchange_first_page_at_1m{case}", **latency_fields(server_rounds), unit="ms",
         stored=stored, rows=50, path=path, target="p99_ms <= 50", met=p99 <= 50,
         how="the server's time for GET (its Server-Timing header): auth, exchange/page, render",
         round_trip_p50_ms=median_pct(client_rounds, 0.5),
         round_trip_p99_ms=median_pct(client_rounds, 0.99))
