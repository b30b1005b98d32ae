"""Bad input on the console's Act form, in a real browser (docs/guide/console.md): each case shows the app's
own error inline (its code and what is allowed) and leaves the store unchanged; good input round-trips exactly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.console.conftest import ConsoleApp, log_in, shoot
from wardian.model import MAX_MESSAGE_BYTES, OPERATOR_UUID

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def agents(shared_console_app: ConsoleApp) -> ConsoleApp:
    """`alpha`, and two agents both named `twin` (an ambiguous name)."""
    for name in ("alpha", "twin", "twin"):
        shared_console_app.app.call("agent/add", {"name": name, "provider": "codex"})
    return shared_console_app


@pytest.fixture
def act_page(agents: ConsoleApp, context: Any) -> Iterator[Any]:
    page = context.new_page()
    log_in(page, agents)
    page.goto(agents.base + "/act")
    return page


def _send(page: Any, target: str, text: str, kind: str = "task") -> None:
    page.fill("#send [name=target]", target)
    page.check(f"#send [name=kind][value={kind}]")
    # Set through the DOM: a NUL or 65,537 characters are exactly what a person could paste.
    page.locator("#send [name=text]").evaluate("(el, value) => { el.value = value; }", text)
    page.click("#send button[type=submit]")


BAD = [
    ("empty-text", "alpha", "", "task", "empty_message", "1..65536 UTF-8 bytes"),
    ("whitespace-text", "alpha", " \n\t  \n", "information", "empty_message", "1..65536 UTF-8 bytes"),
    ("65537-bytes", "alpha", "a" * (MAX_MESSAGE_BYTES + 1), "task", "message_too_large", "1..65536 UTF-8 bytes"),
    ("65537-bytes-multibyte", "alpha", "é" * 32768 + "a", "information", "message_too_large", "1..65536 UTF-8 bytes"),
    ("nul", "alpha", "before\x00after", "task", "invalid_text", "valid Unicode text without NUL"),
    ("unknown-target", "nobody", "hello", "task", "unknown_target", None),
    ("the-operator-itself", "operator", "hello", "task", "unknown_target", None),
    ("the-operator-uuid", OPERATOR_UUID, "hello", "information", "unknown_target", None),
    ("ambiguous-target", "twin", "hello", "task", "ambiguous_target", None),
    ("empty-target", "", "hello", "task", "invalid_target", "one agent name or UUID"),
    ("broadcast-star", "*", "hello", "task", "broadcast_not_allowed", "one agent name or UUID"),
    ("broadcast-all", "all", "hello", "information", "broadcast_not_allowed", "one agent name or UUID"),
    ("broadcast-everyone", "@everyone", "hello", "task", "broadcast_not_allowed", "one agent name or UUID"),
    ("broadcast-list", "alpha,twin", "hello", "task", "broadcast_not_allowed", "one agent name or UUID"),
    ("broadcast-spaces", "alpha twin", "hello", "information", "broadcast_not_allowed", "one agent name or UUID"),
]


@pytest.mark.parametrize(("case", "target", "text", "kind", "code", "allowed"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_shows_the_apps_error_inline_and_changes_nothing(
        agents: ConsoleApp, act_page: Any, evidence: Path, case: str, target: str, text: str, kind: str, code: str,
        allowed: str | None) -> None:
    before = agents.records()
    _send(act_page, target, text, kind)
    error = act_page.locator("#act-result .result.error")
    expect(error).to_have_attribute("data-code", code)
    expect(error.locator(".code")).to_have_text(code)
    if allowed is not None:
        expect(error.locator(".allowed")).to_contain_text(f"allowed: {allowed}")
    expect(error.locator(".unchanged")).to_have_text("Nothing was changed.")
    if code == "ambiguous_target":
        twins = [a["uuid"] for a in agents.app.call("agent/list")["agents"] if a["name"] == "twin"]
        for uuid in twins:
            expect(error.locator(".candidates")).to_contain_text(uuid)
    assert act_page.input_value("#send [name=text]") == text  # kept, to be fixed
    assert agents.records() == before
    if case in ("empty-text", "ambiguous-target", "broadcast-list"):
        shoot(act_page, evidence, "act-error")


def test_without_javascript_the_form_answers_with_the_page_and_its_error(agents: ConsoleApp, browser: Any,
                                                                          evidence: Path) -> None:
    """The console works without its script: a plain form post re-renders the page with the app's error inline and
    what was typed, and the store is unchanged."""
    ctx = browser.new_context(java_script_enabled=False)
    try:
        page = ctx.new_page()
        page.goto(agents.login_url(), wait_until="commit")
        page.wait_for_url("**/agents")
        page.goto(agents.base + "/act")
        before = agents.records()
        page.fill("#send [name=target]", "nobody")
        page.fill("#send [name=text]", "kept as typed")
        with page.expect_navigation() as nav:
            page.click("#send button[type=submit]")
        response = nav.value
        assert response is not None
        assert response.status == 404
        expect(page.locator("#act-result .result.error")).to_have_attribute("data-code", "unknown_target")
        assert page.input_value("#send [name=target]") == "nobody"
        assert page.input_value("#send [name=text]") == "kept as typed"
        assert agents.records() == before
        shoot(page, evidence, "act-error-no-js")
    finally:
        ctx.close()


@pytest.mark.parametrize(("kind", "text"), [
    ("task", "a" * MAX_MESSAGE_BYTES),
    ("information", "Grüße ✓ 🙂\n\ttabs, \"quotes\" & <angles>\nend"),
])
def test_good_input_is_admitted_and_stored_exactly(agents: ConsoleApp, act_page: Any, kind: str, text: str) -> None:
    """The limit itself (65,536 bytes) is admitted; Unicode, tabs and line breaks arrive exactly (a textarea's CRLF
    becomes the LF typed)."""
    _send(act_page, "alpha", text, kind)
    ok = act_page.locator("#act-result .result.ok")
    expect(ok).to_contain_text("admitted for alpha")
    record_id = ok.get_attribute("data-record")
    story = agents.app.call("request/show", {"id": record_id})
    assert (story["kind"], story["text"], story["sender_kind"]) == (kind, text, "operator")
    assert story["sender"] == {"name": "operator", "uuid": OPERATOR_UUID}
