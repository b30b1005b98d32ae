"""`wardian auth login|status|logout codex` for the ChatGPT sign-in, as a person runs them, offline: the real CLI
and Codex, the harness's loopback backend as the sign-in's issuer (the test approves the device code, as the person
entering it would). No token ever appears in what the commands print."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wardian_cmd
from tests.providers.codex.conftest import codex_or_skip
from wardian.home import Home
from wardian.home_setup import adopt_home
from wardian_harness.models.chatgpt_backend import EMAIL, PLAN_TYPE, ChatGPTBackend
from wardian_harness.models.scripted_model import ScriptedModel

pytestmark = pytest.mark.codex


class Cli:
    """`wardian` in a home pointed at the backend; `transcript` keeps everything every command printed."""

    def __init__(self, home: Home, backend: ChatGPTBackend) -> None:
        self.home = home
        self.backend = backend
        self.transcript: list[bytes] = []
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        self.env.update(backend.env(), WARDIAN_HOME=str(home.root), WARDIAN_CODEX=str(codex_or_skip()),
                        WARDIAN_CREDENTIAL_STORE="file")

    def run(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run([*wardian_cmd(), *args], env=self.env, capture_output=True, timeout=120, check=False)
        self.transcript += [done.stdout, done.stderr]
        return done

    def login(self, *args: str, on_line: dict[str, str]) -> tuple[int, str, str]:
        """Run `auth login codex ARGS`; on a stderr line starting with a key of `on_line`, act ("approve" the code
        that line shows, or "interrupt"). Its exit status, stdout and stderr."""
        with subprocess.Popen([*wardian_cmd(), "auth", "login", "codex", *args], env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            assert proc.stderr is not None
            assert proc.stdout is not None
            stderr = proc.stderr
            lines: queue.Queue[bytes] = queue.Queue()

            def read() -> None:
                for x in iter(stderr.readline, b""):
                    lines.put(x)
                lines.put(b"")

            threading.Thread(target=read, daemon=True).start()
            err: list[bytes] = []
            while (line := lines.get(timeout=120)) != b"":
                err.append(line)
                text = line.decode().strip()
                for prefix, action in on_line.items():
                    if text.startswith(prefix) and action == "approve":
                        self.backend.approve_device_code(text.split()[-1])
                    elif text.startswith(prefix) and action == "interrupt":
                        proc.send_signal(signal.SIGINT)
            stdout = proc.stdout.read()
            code = proc.wait(timeout=60)
        self.transcript += [stdout, *err]
        return code, stdout.decode(), b"".join(err).decode()


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    with ScriptedModel() as model, ChatGPTBackend(tmp_path / "chatgpt", model) as backend:
        home = Home(tmp_path / "home")
        adopt_home(home)  # a wardian home, as the CLI makes one
        home.codex_auth_dir.mkdir(mode=0o700)
        (home.codex_auth_dir / "config.toml").write_text("\n".join(backend.codex_overrides()) + "\n", encoding="utf-8")
        yield Cli(home, backend)


def test_login_status_logout_with_a_device_code(cli: Cli) -> None:
    code, stdout, stderr = cli.login("--json", on_line={"WARD-": "approve"})
    assert code == 0, stderr
    assert f"open {cli.backend.url}/codex/device in any browser and enter the code" in stderr
    signed = json.loads(stdout)
    assert (signed["provider"], signed["name"], signed["kind"], signed["mask"]) == ("codex", "default", "chatgpt", "…")
    assert (signed["email"], signed["plan_type"]) == (EMAIL, PLAN_TYPE)
    assert "codex-auth" in signed["where"]

    status = cli.run("auth", "status", "--json")
    assert status.returncode == 0
    [entry] = json.loads(status.stdout)["credentials"]
    assert (entry["kind"], entry["mask"]) == ("chatgpt", "…")
    assert cli.run("auth", "status").stdout.decode().count("chatgpt") == 1

    session = json.loads((cli.home.codex_auth_dir / "auth.json").read_text())["tokens"]
    out = cli.run("auth", "logout", "codex")
    assert out.returncode == 0, out.stderr
    assert [r.body["token"] for r in cli.backend.requests_to("/oauth/revoke")] == [session["refresh_token"]]
    assert not (cli.home.codex_auth_dir / "auth.json").exists()
    assert cli.run("auth", "logout", "codex").returncode == 4
    assert json.loads(cli.run("auth", "status", "--json").stdout)["credentials"] == []
    secrets = [s.encode() for s in cli.backend.issued_secrets()]
    assert secrets
    assert [s for s in secrets if any(s in printed for printed in cli.transcript)] == []


def test_ctrl_c_cancels_the_sign_in_with_exit_130_and_nothing_stored(cli: Cli) -> None:
    code, _, stderr = cli.login(on_line={"Waiting for the sign-in": "interrupt"})
    assert code == 130
    assert "Sign-in cancelled." in stderr
    assert json.loads(cli.run("auth", "status", "--json").stdout)["credentials"] == []
    assert not (cli.home.codex_auth_dir / "auth.json").exists()


def test_a_second_name_or_a_browser_on_another_provider_is_refused(cli: Cli) -> None:
    named = cli.run("auth", "login", "codex", "--name", "work")
    assert named.returncode == 2
    assert b"one ChatGPT sign-in" in named.stderr
    other = cli.run("auth", "login", "opencode", "--browser")
    assert other.returncode == 2
    assert cli.backend.requests == []  # nothing was asked of the sign-in
    assert not (cli.home.codex_auth_dir / "auth.json").exists()
