"""What an agent's Codex writes to its logs when the app runs with RUST_LOG (docs/providers/codex.md#logs): the app
passes the person's directives on with none above `debug`, since at `trace` Codex's crates log what goes over the
wire, the agent's `Authorization` header among it.

The end-to-end test signs an agent in with a canary key, runs a real Codex turn against the scripted model under
`RUST_LOG=trace`, and searches every file under the home for the key; the unit tests hold `clamp_rust_log` to
EnvFilter's own grammar (tracing-subscriber's `Directive::parse`), mirrored in `envfilter_level`.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import AppHandle, app_on_root, short_home, wardian_cmd
from tests.providers.codex.conftest import codex_or_skip
from wardian.auth.store import CredentialStore
from wardian.providers.codex.launch import clamp_rust_log
from wardian_harness.models.scripted_model import Message, ScriptedModel
from wardian_harness.secrets import assert_secrets_absent

CANARY = "sk-canary-rustlog-4e7a1c9b2d5f8a03"
LEVELS = {"off": 0, "error": 1, "warn": 2, "info": 3, "debug": 4, "trace": 5}
_DIRECTIVE = re.compile(r"""(?x)
    ^(?P<global_level>(?i:trace|debug|info|warn|error|off|[0-5]))$ |
    ^(?:(?P<target>[\w:-]+)|(?P<span>\[[^\]]*\])){1,2}
     (?:=(?P<level>(?i:trace|debug|info|warn|error|off|[0-5]))?)?$
""")
"""tracing-subscriber's directive grammar (`filter/env/directive.rs`), in Python's regex dialect."""


def envfilter_level(directive: str) -> int | None:
    """The level (0 off .. 5 trace) EnvFilter gives a directive, None when it ignores it as unparseable."""
    match = _DIRECTIVE.match(directive)
    if match is None:
        return None
    word = match["global_level"] or match["level"]
    if word is None:
        return LEVELS["trace"]  # a target or span without a level enables every level
    return int(word) if word.isdigit() else LEVELS[word.lower()]


@pytest.mark.parametrize(("given_value", "passed"), [
    ("trace", "debug"), ("TRACE", "debug"), ("5", "4"), ("info", "info"), ("", ""),
    ("warn,codex_core=trace", "warn,codex_core=debug"),
    ("tungstenite", "tungstenite=debug"), ("tungstenite=", "tungstenite=debug"),
    ("tungstenite::handshake::client=Trace", "tungstenite::handshake::client=debug"),
    ("[session_loop]=trace", "[session_loop]=debug"), ("h2[{stream=1}]", "h2[{stream=1}]=debug"),
    ("trace,,codex_core=info", "debug,codex_core=info"), ("reqwest=bogus", "reqwest=bogus=debug"),
])
def test_every_directive_keeps_its_target_and_loses_only_trace(given_value: str, passed: str) -> None:
    """Our choice (docs/providers/codex.md#logs): targets, spans and lower levels stay as the person wrote them."""
    assert clamp_rust_log(given_value) == passed


_PIECES = st.sampled_from(["trace", "TRACE", "5", "debug", "info", "off", "=", "==", "[", "]", "{", "}", "a", "b::c",
                           "tungstenite", "-", " ", "x=1", "[span]", "[{f=trace}]", ",", "0"])


@given(st.lists(_PIECES, max_size=12).map("".join))
def test_no_directive_envfilter_accepts_is_above_debug_after_the_clamp(value: str) -> None:
    """Whatever the person's RUST_LOG, each directive EnvFilter would read from what Codex gets enables `debug` at
    most, so no `trace` event reaches Codex's stderr, whatever their order or precedence."""
    clamped = clamp_rust_log(value)
    levels = [envfilter_level(d) for d in clamped.split(",") if d]
    assert all(level is None or level <= LEVELS["debug"] for level in levels), clamped
    assert clamp_rust_log(clamped) == clamped


@dataclass
class LogWorld:
    app: AppHandle
    model: ScriptedModel

    def cli(self, *args: str, stdin: bytes | None = None) -> str:
        env = {**self.app.env(), "WARDIAN_CREDENTIAL_STORE": "file"}
        done = subprocess.run([*wardian_cmd(), *args], env=env, input=stdin, capture_output=True, timeout=300,
                              check=False)
        assert done.returncode == 0, (args, done.stderr.decode())
        return (done.stdout + done.stderr).decode()


def wait_logged(log_db: Path, text: str, timeout_s: float = 60.0) -> None:
    """Wait (bounded) until Codex's log database holds a line with `text`: it writes its lines in order, in batches a
    couple of seconds apart, and drops the batch in hand when the app-server is stopped."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with closing(sqlite3.connect(f"file:{log_db}?mode=ro", uri=True)) as db:
            if db.execute("SELECT 1 FROM logs WHERE feedback_log_body LIKE ?", (f"%{text}%",)).fetchone():
                return
        time.sleep(0.1)
    raise AssertionError(f"{log_db} never logged {text!r}")


@pytest.fixture
def trace_world() -> Iterator[LogWorld]:
    """An app whose own environment says RUST_LOG=trace, as a person debugging it would start it."""
    env = {"WARDIAN_CODEX": str(codex_or_skip()), "WARDIAN_CREDENTIAL_STORE": "file", "RUST_LOG": "trace"}
    with ScriptedModel() as model, app_on_root(short_home("wrl"), env) as app:
        yield LogWorld(app, model)


def test_rust_log_trace_in_the_apps_environment_leaves_the_key_out_of_every_log(trace_world: LogWorld) -> None:
    """Before, Codex wrote the agent's Authorization header into its log at `trace`. Codex still logs for the person
    (its debug lines are there), and no file under the home but the credential store holds the key: not the provider
    log, nor Codex's own log database (which logs whatever RUST_LOG says), nor any other."""
    world = trace_world
    world.cli("auth", "login", "codex", "--with-api-key", stdin=CANARY.encode() + b"\n")
    script = world.model.agent("worker").require_key(CANARY).add(Message("done", phase="final_answer"))
    _, lead = world.app.add_agent("lead")
    outputs = [world.cli("agent", "add", "worker", "--provider", "codex")]
    settings = [f"openai_base_url={script.base_url}", "model=mock-model", "approval_policy=never",
                "features.plugins=false", "features.apps=false"]
    outputs.append(world.cli("agent", "start", "worker", *[a for s in settings for a in ("-c", s)]))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "go"})
    [reply] = world.app.records_for(lead)
    assert (reply["request_id"], reply["text"]) == (task["request_id"], "done")
    assert [r.carried(CANARY) for r in script.requests] == [True]  # the key went over the wire, as a header
    home = world.app.home
    [log_db] = home.root.glob("agents/*/codex/logs_2.sqlite")
    wait_logged(log_db, "app-server event: turn/completed")  # searched below too, with all the turn's lines
    outputs.append(world.cli("agent", "stop", "worker"))
    assert_secrets_absent([home.root], outputs, [CANARY], exclude=[CredentialStore(home).path])
    [codex_log] = home.log_dir.glob("codex-*.log")
    plain = re.sub(rb"\x1b\[[0-9;]*m", b"", codex_log.read_bytes())  # Codex colours its stderr even in a file
    assert set(re.findall(rb"Z +(TRACE|DEBUG) ", plain)) == {b"DEBUG"}
