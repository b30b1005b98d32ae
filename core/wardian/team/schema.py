"""The JSON Schema of the team file, from the same tables the loader checks against: the keys and their meaning
below, the providers, modes, tools, name rules and what each provider can do. It is written beside this module
(`schema.json`, shipped with the package) so editors that read TOML with a schema (taplo, Even Better TOML) can
complete and check a team file; `docs/reference/team-file.md` is rendered from it (scripts/gen_reference.py).

`load_team` is the authority: it checks more than a schema can say (each setting as its provider reads it,
workspaces on disk), and everything it accepts, the schema accepts. scripts/gen_reference.py writes the file with the
reference pages, and its `--check` (tests/test_docs.py) fails when the file differs from what this module gives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wardian.approval_rules import MAX_RULE_CHARS, MAX_RULES
from wardian.approvals import POLICIES
from wardian.durations import DURATION_PATTERN
from wardian.model import MAX_AGENT_NAME_CHARS, OPERATOR_NAME, PROVIDERS
from wardian.protocol.tools import TOOL_NAMES
from wardian.taskpolicy import MAX_CHAIN_TASKS_LIMIT, MAX_TASK_DEPTH_LIMIT
from wardian.team import rules

SCHEMA_FILE = Path(__file__).resolve().with_name("schema.json")
DIALECT = "http://json-schema.org/draft-07/schema#"  # the draft taplo and Even Better TOML read

TEAM_FIELDS: dict[str, str] = {
    "home": "The Wardian home the team lives in: its store, its agents' private homes, the app's socket. Relative "
            "paths are read from this file's directory. Default: $WARDIAN_HOME, else `.wardian` beside this file.",
    "console": "Also serve the web console on this loopback address, as `wardian app run --console` takes it "
               "(`127.0.0.1:8765`, `8765`, `[::1]:8765`; port 0 picks a free one). Left out: no console.",
    "notify": "Run this command (a list: the program and its arguments; no shell unless you name one) with one JSON "
              "event on its stdin when an approval waits for a person and when a task a person sent ends, as `wardian "
              "app run --notify-command` does (docs/guide/approvals.md#notifications). Left out: no notifications.",
    "task_deadline": "How long an agent has to answer a task whose sender gave no deadline (`followup_task`'s "
                     "deadline_ms, `wardian message task --deadline`): a duration of 1s..7d (`90s`, `30m`, `1h30m`). "
                     "At it wardian ends the task as failed (deadline_exceeded), interrupting the turn that works on "
                     "it. Left out: no deadline.",
    "max_task_depth": "The loop guard: how deep a chain of tasks may grow (a task an agent assigns while it works on "
                      "a task is that task's child); one level more is refused with task_depth_exceeded. 1..1000, "
                      "default 8.",
    "max_chain_tasks": "The loop guard: how many tasks one chain (a task and every task made under it) may hold; one "
                       "more is refused with chain_budget_exceeded. 1..100000, default 64.",
}
AGENT_FIELDS: dict[str, str] = {
    "provider": "Which coding agent runs it: codex, opencode, claude, qwen, gemini, pi or acp (any other agent that "
                "speaks the Agent Client Protocol, with `command`). Required.",
    "workspace": "The directory the agent works in; it must exist. Relative paths are read from this file's "
                 "directory. Default: a private directory under the home.",
    "mode": "background (the app runs the agent alone) or attached (Codex only: open its TUI with `wardian agent "
            "attach NAME`). Default: the mode of the agent's last start, else background.",
    "approve_tools": "The wardian tools the agent may use without asking (`wardian agent start --approve-tools`). "
                     "Codex, Claude Code, Qwen Code and Gemini CLI: OpenCode has no approval step for them.",
    "auth": "The credential its starts use, by the name given to `wardian auth login --name`. Default: the "
            "provider's default credential. A name, never a secret.",
    "settings": "The agent's launch settings: exactly the keys `wardian agent start NAME -c KEY=VALUE` takes for "
                "its provider, as a TOML table (`model = \"o3\"`), merged over [defaults.<provider>].",
    "command": "For provider acp (and only there, where it is required): the command line that starts the agent "
               "speaking ACP on stdio, as an array (`command = [\"opencode\", \"acp\"]`); its first word an "
               "executable on the app's PATH or an absolute path.",
    "env": "Variables of the provider process's environment, as `wardian agent start --env NAME=VALUE` takes them "
           "(`env = { OPENAI_BASE_URL = \"http://…\" }`); no credential's name (*_API_KEY, *_TOKEN, *_SECRET, "
           "*PASSWORD*): those go through `wardian auth login`.",
    "worktree": "true: the agent works in a git worktree of the repository (`workspace`, default: this file's "
                "folder), made under the home on branch `wardian/NAME`; a string: on that branch. Made again when "
                "gone; `wardian down` and `wardian agent remove` keep it and its branch unless given "
                "--remove-worktree, and then only when it is clean. Default: false.",
    "approvals": "Who answers the agent's permission requests (`wardian agent start --approvals`; "
                 "docs/guide/approvals.md): person (`wardian approval allow|deny`, the console), lead (the agent "
                 "that sent the task being worked on; a person's task falls back to a person) or deny (each is "
                 "denied at once, and recorded). Default: deny.",
    "approval_timeout": "How long an approval waits for its answer before it is denied (`wardian agent start "
                        "--approval-timeout`), as a duration: `90s`, `10m`, `1h`. Default: 10m.",
    "allow": "Allow rules, as Claude Code writes them (`wardian agent start --allow`; "
             "docs/guide/approvals.md#allow-rules): a permission request one matches is allowed without asking, "
             "whatever `approvals` says: `Bash(git status:*)` (a command and its arguments; also Codex's `shell`, "
             "OpenCode's and Pi's `bash`), `shell(ls *)`, `Edit(docs/*)` (file changes), `edit`, "
             "`mcp__github__create_issue`. Default: none.",
}
SETTINGS_OF: dict[str, str] = {
    "codex": "Keys of Codex's config.toml, as `codex -c` takes them (model, model_reasoning_effort, features.*, "
             "model_providers.*).",
    "opencode": "Keys of the agent's opencode.json (model, provider.*, agent.*).",
    "claude": "Keys of the agent's Claude Code settings.json (model, env.*, permissions.*). An env.* value whose "
              "name holds KEY, TOKEN, SECRET or PASSWORD goes to the process's environment, never to a file.",
    "qwen": "Keys of the agent's Qwen Code settings.json (model.name, security.auth.*); env.NAME sets a variable "
            "of its process's environment instead, never a file.",
    "gemini": "Keys of the agent's Gemini CLI settings.json (model.name, ...); env.NAME sets a variable of its "
              "process's environment instead, never a file.",
    "pi": "Keys of the agent's Pi settings.json (defaultProvider, defaultModel, retry.*); models.KEY sets a key of "
          "its models.json (models.providers.ID = {...}); env.NAME sets a variable of its process's environment "
          "instead, never a file.",
    "acp": "Only env.NAME keys, each a variable of the agent's process's environment: wardian knows no settings file "
           "of a generic ACP agent (its command line's arguments, or its environment, configure it).",
}
MODEL_OF: dict[str, str] = {
    "codex": "The model Codex uses (`o3`, `gpt-5-codex`).",
    "opencode": "The model OpenCode uses, as PROVIDER/MODEL (`openai/gpt-5`).",
    "claude": "The model Claude Code uses (`sonnet`, `opus`, or a full model name).",
    "qwen": "The model Qwen Code uses (its settings' `model.name`).",
    "gemini": "The model Gemini CLI uses (its settings' `model.name`).",
    "pi": "The model Pi uses (its settings' `defaultModel`, of `defaultProvider`).",
}
TEAM_DOC = "What the team shares: where it lives and its web console."
DEFAULTS_DOC = ("Settings every agent of a provider starts with, under [defaults.codex], [defaults.opencode], "
                "[defaults.claude], [defaults.qwen], [defaults.gemini], [defaults.pi] or [defaults.acp]; an agent's "
                "own settings win, key by key.")
AGENTS_DOC = ("One table per agent, [agents.NAME]: NAME as `wardian agent add NAME` takes it. `wardian up` adds "
              "and starts each one.")


def _anycase(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


def agent_name_schema() -> dict[str, Any]:
    from wardian.protocol.methods import base  # pydantic (~100 ms): the schema's alone, not `wardian init`'s

    reserved = sorted(n for n in {*base.BROADCAST_NAMES, "wardian", OPERATOR_NAME} if base.AGENT_NAME_RE.match(n))
    return {"type": "string", "pattern": base.AGENT_NAME_RE.pattern,
            "not": {"anyOf": [{"pattern": base._UUID_RE.pattern},
                              {"pattern": "^(?:" + "|".join(_anycase(n) for n in reserved) + ")$"}]},
            "description": f"1..{MAX_AGENT_NAME_CHARS} characters of A-Z a-z 0-9 . _ -, starting with a letter or "
                           "digit; not a UUID and not all/everyone/here/broadcast/wardian/operator."}


def _agent_schema() -> dict[str, Any]:
    from wardian.auth.checks import NAME_ALLOWED, NAME_PATTERN  # the credential model: `wardian init` never loads it

    props: dict[str, Any] = {
        "provider": {"enum": list(PROVIDERS)},
        "workspace": {"type": "string", "minLength": 1},
        "mode": {"enum": list(rules.MODES)},
        "approve_tools": {"type": "array", "items": {"enum": list(TOOL_NAMES)}},
        "auth": {"type": "string", "pattern": f"^(?:{NAME_PATTERN.pattern})$"},
        "settings": {"type": "object"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "command": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        "worktree": {"type": ["boolean", "string"], "minLength": 1},
        "approvals": {"enum": list(POLICIES)},
        "approval_timeout": {"type": "string", "pattern": DURATION_PATTERN},
        "allow": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": MAX_RULE_CHARS},
                  "maxItems": MAX_RULES},
    }
    for key, doc in AGENT_FIELDS.items():
        props[key]["description"] = doc + (f" {NAME_ALLOWED}." if key == "auth" else "")
    rules_of: list[dict[str, Any]] = []
    for provider in PROVIDERS:
        caps = rules.capabilities(provider)
        then: dict[str, Any] = {"settings": _settings_schema(provider)}
        if not caps.attach:
            then["mode"] = {"enum": ["background"]}
        if not caps.tool_grants:
            then["approve_tools"] = {"maxItems": 0}
        rules_of.append({"if": {"properties": {"provider": {"const": provider}}, "required": ["provider"]},
                         "then": {"properties": then}})
    return {"type": "object", "additionalProperties": False, "required": ["provider"], "properties": props,
            "allOf": rules_of}


def _settings_schema(provider: str) -> dict[str, Any]:
    model = {"model": {"description": MODEL_OF[provider]}} if provider in MODEL_OF else {}
    return {"type": "object", "description": SETTINGS_OF[provider], "properties": model}


def schema() -> dict[str, Any]:
    """The schema document."""
    team = {"type": "object", "additionalProperties": False, "description": TEAM_DOC,
            "properties": {"home": {"type": "string", "minLength": 1, "description": TEAM_FIELDS["home"]},
                           "console": {"type": "string", "minLength": 1, "description": TEAM_FIELDS["console"]},
                           "notify": {"type": "array", "minItems": 1, "items": {"type": "string"},
                                      "description": TEAM_FIELDS["notify"]},
                           "task_deadline": {"type": "string", "pattern": DURATION_PATTERN,
                                             "description": TEAM_FIELDS["task_deadline"]},
                           "max_task_depth": {"type": "integer", "minimum": 1, "maximum": MAX_TASK_DEPTH_LIMIT,
                                              "description": TEAM_FIELDS["max_task_depth"]},
                           "max_chain_tasks": {"type": "integer", "minimum": 1, "maximum": MAX_CHAIN_TASKS_LIMIT,
                                               "description": TEAM_FIELDS["max_chain_tasks"]}}}
    defaults = {"type": "object", "additionalProperties": False, "description": DEFAULTS_DOC,
                "properties": {p: _settings_schema(p) for p in PROVIDERS}}
    agents = {"type": "object", "minProperties": 1, "description": AGENTS_DOC,
              "propertyNames": {"$ref": "#/definitions/agent_name"},
              "additionalProperties": {"$ref": "#/definitions/agent"}}
    return {"$schema": DIALECT, "title": "wardian team file (wardian.toml)",
            "description": "A team of coding agents in one file: `wardian init` writes one, `wardian up` makes it so "
                           "(docs/guide/team-file.md).",
            "type": "object", "additionalProperties": False, "required": ["agents"],
            "properties": {"team": team, "defaults": defaults, "agents": agents},
            "definitions": {"agent_name": agent_name_schema(), "agent": _agent_schema()}}


def render() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
