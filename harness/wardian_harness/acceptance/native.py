"""Two real agents (Codex, OpenCode, Claude Code, an ACP agent, Pi, in any pair) in one isolated run, driven the way
a person drives them: through the wardian CLI.

`NativeRun` is the shared engine of the native acceptance (`e2e_native/`), the runner (`run-native-e2e`) and
the demo (`wardian demo`): it starts an app on the run's home, registers agents with fixture workspaces,
starts them (`wardian agent start`, background or attached), attaches their TUIs (`wardian agent attach` in a
harness terminal), sends the operator's plain-English request and collects the records. It asserts nothing;
the acceptance test does.

The team and its grants are `settings`; the scripted stand-in for a model is `exchange`.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wardian.client import AppClient
from wardian.home import Home
from wardian_harness.acceptance.exchange import WARMUP_ANSWER, WARMUP_PROMPT
from wardian_harness.acceptance.homes import IsolatedRun
from wardian_harness.acceptance.settings import Settings
from wardian_harness.models.scripted_model import AgentScript, ScriptedModel
from wardian_harness.processes import apps
from wardian_harness.processes.proctree import ProcessTree
from wardian_harness.providers.acp_home import ACP_PROVIDERS, acp_launch
from wardian_harness.providers.claude_home import ScriptedClaude, claude_overrides
from wardian_harness.providers.cli import CliInstall
from wardian_harness.providers.codex_home import DUMMY_API_KEY, ScriptedProvider, codex_overrides
from wardian_harness.providers.codex_install import CodexInstall
from wardian_harness.providers.opencode_home import ScriptedOpenCode, opencode_overrides
from wardian_harness.providers.pi_home import pi_settings

if TYPE_CHECKING:
    # The terminal (pyte, pexpect: the harness extra) loads only for attached mode, so the background demo runs
    # on an install without that extra.
    from wardian_harness.processes.terminal import Terminal


class NativeRunError(RuntimeError):
    """A step of the native run failed; the message says which and what was seen."""


@dataclass
class Agent:
    name: str
    uuid: str
    workspace: Path | None
    codex_home: Path
    provider: str = "codex"
    script: AgentScript | None = None
    terminal: Terminal | None = None
    started: list[dict[str, Any]] = field(default_factory=list)  # each `agent start --json` result
    config: list[str] = field(default_factory=list)  # the -c overrides given (no secrets: the key is a dummy)
    opencode_dir: Path | None = None  # an OpenCode agent's private XDG root (config, data, cache, state)
    claude_dir: Path | None = None  # a Claude Code agent's private directories (config/: settings, transcripts)
    pi_dir: Path | None = None  # a Pi agent's private directories (agent/, sessions/)


def poll(check: Callable[[], Any], what: str, *, rounds: int = 600, interval_s: float = 0.05) -> Any:
    """Call `check` until it returns something truthy, at most `rounds` times; return that.

    Raises:
        NativeRunError: it never did.
    """
    pause = threading.Event()
    for _ in range(rounds):
        result = check()
        if result:
            return result
        pause.wait(interval_s)  # the poll interval of a bounded poll, not a synchronisation point
    raise NativeRunError(f"timed out waiting for {what}")


class NativeRun:
    """One app and its agents on an isolated run root, every child in `tree`."""

    def __init__(self, settings: Settings, run: IsolatedRun, tree: ProcessTree, codex: CodexInstall,
                 model: ScriptedModel | None, progress: Callable[[str], None] | None = None,
                 opencode: CliInstall | None = None, claude: CliInstall | None = None,
                 acp: Mapping[str, CliInstall] | None = None, pi: CliInstall | None = None) -> None:
        self.settings = settings
        self.run = run
        self.tree = tree
        self.codex = codex
        self.opencode = opencode
        self.claude = claude
        self.acp = dict(acp or {})
        """Qwen Code and Gemini CLI, by provider name, for the ACP agents of the team."""
        self.pi = pi
        self.model = model
        self.progress = progress or (lambda _line: None)
        self.home = Home(run.wardian_home)
        self.agents: dict[str, Agent] = {}
        self.app_proc: subprocess.Popen[bytes] | None = None
        self.app_starts = 0
        self.commands: list[list[str]] = []  # every wardian command run, for the report (no secrets in argv)
        self._sessions: dict[str, str] = {}

    def run_tick(self) -> None:
        """One poll interval for the bounded polls of the acceptance."""
        threading.Event().wait(0.05)

    # -- processes -------------------------------------------------------------------------------------------

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of every child: the run's allowlisted env, the selected Codex (and OpenCode, Claude Code),
        the dummy model key."""
        codex_dir = str(self.codex.executable.parent)
        path = os.pathsep.join([codex_dir, os.environ.get("PATH", "")])
        chosen = {"WARDIAN_OPENCODE": str(self.opencode.executable)} if self.opencode is not None else {}
        if self.claude is not None:
            chosen["WARDIAN_CLAUDE"] = str(self.claude.executable)
        chosen.update({f"WARDIAN_{name.upper()}": str(cli.executable) for name, cli in self.acp.items()})
        if self.pi is not None:
            chosen["WARDIAN_PI"] = str(self.pi.executable)
        return self.run.child_env({"PATH": path, "WARDIAN_CODEX": str(self.codex.executable), **chosen,
                                   "WARDIAN_SCRIPTED_MODEL_KEY": DUMMY_API_KEY, **(extra or {})})

    def app_args(self) -> tuple[str, ...]:
        """Extra arguments of `wardian app run` (a host of a shared store adds `--store` and `--host-name`)."""
        return ()

    def start_app(self) -> None:
        """`wardian app run` on the run's home, in the tree; returns once it accepts calls."""
        self.progress(f"starting the app on {self.home.root}")
        spawned: list[subprocess.Popen[bytes]] = []

        def spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
            env = kwargs.pop("env")
            spawned.append(self.tree.spawn(argv, env, **kwargs))
            return spawned[-1]

        with open(self.run.root / f"app-stderr-{self.app_starts}.log", "wb") as log:  # the child holds its own copy
            try:
                proc = apps.start(self.home.root, env=self.env(), command=self.settings.app, stderr=log, spawn=spawn,
                                  timeout_s=300, extra_args=self.app_args())
            except apps.AppDidNotStart as exc:
                for child in spawned:
                    self.tree.stop(child)
                args = "".join(f" {a}" for a in self.app_args())
                raise NativeRunError(f"the app{args} did not start: {exc.error.code}: {exc.error.message}; see "
                                     f"{self.run.root}/app-stderr-*.log") from None
        self.app_proc = proc
        self.app_starts += 1

    def stop_app(self) -> None:
        """Stop the app (SIGTERM: every owner and its app-server ends with it)."""
        if self.app_proc is not None:
            self.progress("stopping the app (its Codex owners exit with it)")
            self.tree.stop(self.app_proc, timeout_s=60)
            self.app_proc = None

    def cli(self, *args: str, session: str | None = None, timeout_s: float = 300,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run one wardian command; raises NativeRunError on a non-zero exit."""
        argv = [*self.settings.cli, *args]
        self.commands.append(list(args))
        env = self.env({"WARDIAN_SESSION_ID": session} if session else None)
        done = subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True, encoding="utf-8",
                              timeout=timeout_s, check=False)
        if done.returncode != 0:
            raise NativeRunError(f"`wardian {' '.join(args)}` exited {done.returncode}: {done.stderr.strip()}")
        return done

    def cli_json(self, *args: str, session: str | None = None, timeout_s: float = 300,
                 stdin: str | None = None) -> Any:
        return json.loads(self.cli(*args, "--json", session=session, timeout_s=timeout_s, stdin=stdin).stdout)

    def call(self, method: str, params: dict[str, Any] | None = None, timeout_s: float = 90) -> Any:
        """One app call over the control socket (for polling; actions go through the CLI)."""
        with AppClient(self.home) as client:
            return client.call(method, params, timeout_s=timeout_s)

    # -- agents ----------------------------------------------------------------------------------------------

    def add_agent(self, name: str, *, workspace: bool = True) -> Agent:
        ws = self.run.workspace(name) if workspace else None
        provider = self.settings.provider(name)
        args = ["agent", "add", name, "--provider", provider]
        if ws is not None:
            args += ["--workspace", str(ws)]
        if provider == "acp":
            assert self.opencode is not None  # Installs.find finds OpenCode for a generic ACP agent
            args += ["--command", f"{self.opencode.executable} acp"]
        row = self.cli_json(*args)
        agent = Agent(name, row["uuid"], ws, self.run.codex_home(row["uuid"]), provider=provider,
                      opencode_dir=self.run.opencode_dir(row["uuid"]) if provider == "opencode" else None,
                      claude_dir=self.run.claude_dir(row["uuid"]) if provider == "claude" else None,
                      pi_dir=self.run.pi_dir(row["uuid"]) if provider == "pi" else None)
        if self.model is not None and workspace:
            agent.script = self.model.agent(name)
        self.agents[name] = agent
        return agent

    def session(self, name: str) -> str:
        """A session token for `name` (operator command `wardian agent env`); kept out of every report."""
        if name not in self._sessions:
            self._sessions[name] = self.cli_json("agent", "env", name)["WARDIAN_SESSION_ID"]
        return self._sessions[name]

    @property
    def secrets(self) -> list[str]:
        """Every secret this run handled (session tokens), for the report's no-secret check."""
        return list(self._sessions.values())

    def launch_config(self, agent: Agent) -> list[str]:
        config: list[str] = []
        if agent.provider == "opencode":
            assert agent.script is not None  # Settings.from_env refuses OpenCode with a real model
            return opencode_overrides(ScriptedOpenCode(agent.script.base_url))
        if agent.provider == "claude":
            assert agent.script is not None  # Settings.from_env refuses Claude Code with a real model
            return claude_overrides(ScriptedClaude(agent.script.base_url))
        if agent.provider in ACP_PROVIDERS:
            assert agent.script is not None  # Settings.from_env refuses ACP agents with a real model
            return acp_launch(agent.provider, agent.script.base_url)[0]
        if agent.provider == "pi":
            assert agent.script is not None  # Settings.from_env refuses Pi with a real model
            return pi_settings(agent.script.base_url)
        if agent.script is not None:
            config += codex_overrides(ScriptedProvider(base_url=agent.script.base_url))
        else:
            config += ['approval_policy="never"', 'sandbox_mode="read-only"']
        if self.settings.trust and agent.workspace is not None:
            config.append(f'projects."{agent.workspace}".trust_level="trusted"')
        return config

    def start_agent(self, agent: Agent) -> dict[str, Any]:
        """`wardian agent start` with the mode, the launch config, the grants (and the auth file, real mode)."""
        if self.settings.real and self.settings.auth_home is not None:
            self.run.copy_auth(self.settings.auth_home, agent.codex_home)
        agent.config = self.launch_config(agent)
        args = ["agent", "start", agent.name, "--mode", "attached" if self.settings.attached else "background"]
        for item in agent.config:
            args += ["-c", item]
        if agent.provider in ACP_PROVIDERS and agent.script is not None:
            for item in acp_launch(agent.provider, agent.script.base_url)[1]:
                args += ["--env", item]
        grants = self.settings.grants(agent.name)
        if grants:
            args += ["--approve-tools", ",".join(grants)]
        self.progress(f"starting {agent.name} ({args[4]}, grants: {', '.join(grants) or 'none'})")
        result = self.cli_json(*args, timeout_s=900)
        agent.started.append(result)
        return result

    def attach(self, agent: Agent) -> Terminal:
        """`wardian agent attach NAME` in a harness terminal (pty), adopted into the tree."""
        from wardian_harness.processes.terminal import open_terminal

        self.progress(f"attaching {agent.name}'s Codex TUI")
        terminal = open_terminal([*self.settings.cli, "agent", "attach", agent.name],
                                 self.env({"TERM": "xterm-256color"}))
        self.tree.adopt(terminal.pid)
        agent.terminal = terminal
        return terminal

    def warm_up(self, agent: Agent) -> None:
        """Type one line into the agent's TUI, as a person would, and wait for its answer on screen.

        Added when core marked the first delivery into a brand-new TUI thread uncertain on a transient "list_turns
        is not supported yet"; core now retries it (tests/providers/codex/test_owner_resubscribe.py). The warm-up stays
        as the person's own first turn; removing it needs the scripts' warm-up steps dropped too.
        """
        from wardian_harness.processes.terminal import TerminalTimeout, wait_for_text

        terminal = agent.terminal
        assert terminal is not None
        terminal.send(WARMUP_PROMPT)
        wait_for_text(terminal, WARMUP_PROMPT, self.run_tick)
        expected = WARMUP_ANSWER if agent.script is not None else "Worked for"
        for _ in range(5):  # Enter right after typed text can count as part of a paste burst: press it again
            terminal.send("\r")
            try:
                wait_for_text(terminal, expected, self.run_tick, rounds=100)
                return
            except TerminalTimeout:
                continue
        wait_for_text(terminal, expected, self.run_tick)

    def row(self, name: str) -> dict[str, Any]:
        return next(a for a in self.call("agent/list")["agents"] if a["name"] == name)

    def wait_status(self, name: str, status: str, *, rounds: int = 1200,
                    where: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            row = self.row(name)
            return row if row["status"] == status and (where is None or where(row)) else None
        return poll(check, f"{name} to be {status}", rounds=rounds)

    def wait_active_turn(self, name: str) -> str:
        row = poll(lambda: (r := self.row(name))["status"] == "active" and r.get("active_turn_id") and r,
                   f"{name} to have an active turn")
        return str(row["active_turn_id"])

    # -- messages --------------------------------------------------------------------------------------------

    def story(self, record_id: str) -> dict[str, Any]:
        """`wardian message show ID --json`: one record, its delivery and (a task) its ledger facts and binding."""
        return dict(self.cli_json("message", "show", record_id))

    def task(self, sender: str, target: str, text: str) -> dict[str, Any]:
        return self.cli_json("message", "task", "--to", target, "--stdin", session=self.session(sender), stdin=text)

    def send(self, sender: str, target: str, text: str) -> dict[str, Any]:
        return self.cli_json("message", "send", "--to", target, "--stdin", session=self.session(sender), stdin=text)

    def interrupt(self, sender: str, target: str) -> dict[str, Any]:
        return self.cli_json("message", "interrupt", target, session=self.session(sender))

    def wait_answer(self, name: str, request_id: str, *, rounds: int = 5) -> dict[str, Any]:
        """Receive (and acknowledge) `name`'s mailbox until the reply or notice for `request_id` arrives."""
        token = self.session(name)
        for _ in range(rounds):
            page = self.call("mailbox/receive", {"session": token, "timeout_ms": 60000}, timeout_s=90)
            if page["records"]:
                self.call("mailbox/receive", {"session": token, "ack_cursor": page["cursor"], "limit": 1})
            for record in page["records"]:
                if record["kind"] in ("reply", "notice") and record.get("request_id") == request_id:
                    return dict(record)
        raise NativeRunError(f"no reply for {request_id} reached {name}")

    def records(self) -> list[dict[str, Any]]:
        """The canonical interaction records (`wardian message log --json`)."""
        return list(self.cli_json("message", "log")["records"])

    def agent_list(self) -> list[dict[str, Any]]:
        return list(self.cli_json("agent", "list")["agents"])
