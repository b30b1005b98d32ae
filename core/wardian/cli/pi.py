"""`wardian pi register`: install wardian's extension for a Pi a person runs themselves (the command is
`wardian.cli.registration`'s; this module holds Pi's words)."""

from __future__ import annotations

import shlex
from importlib import import_module

from wardian.cli.registration import RegisterCommand, Target

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from wardian.providers.registration import Registrar, Registration


REGISTRAR = "wardian.providers.pi.registration"
"""Named by where it is, as command handlers are (`wardian.cli.common.Handler`): loaded when the command runs, so
the whole parser (`wardian --help`) imports no provider's stack."""


def _registrar() -> Registrar:
    module: Any = import_module(REGISTRAR)
    return module


def start_line(reg: Registration) -> str:
    """How the person starts their Pi as the agent (the session from `wardian agent env`, never printed)."""
    return f'eval "$(wardian --home {shlex.quote(reg.home)} agent env {shlex.quote(reg.agent["name"])})" && pi'


def _summary(reg: Registration) -> dict[str, Any]:
    return {"extension": None if reg.config_path is None else str(reg.config_path), "command": reg.command,
            "agent": {"name": reg.agent["name"], "uuid": reg.agent["uuid"]}, "home": reg.home,
            "created": reg.created, "start": start_line(reg)}


def _report(reg: Registration) -> list[str]:
    lines: list[str] = []
    if reg.config_path is not None:
        verb = "installed" if reg.created else "updated"
        lines.append(f"{verb} wardian's extension in {reg.config_path}")
    else:
        lines.append("to install wardian's extension, give --extensions-dir (Pi's ~/.pi/agent/extensions)")
    lines += [f"start Pi as agent {reg.agent['name']} ({reg.agent['uuid']}):", f"  {start_line(reg)}"]
    return lines


COMMAND = RegisterCommand(
    "pi", "Pi integration",
    "install wardian's extension (the eight tools) for a Pi you run yourself",
    Target("--extensions-dir", "Pi's extensions dir to install into (~/.pi/agent/extensions, or the extensions/ of "
                               "your PI_CODING_AGENT_DIR); what is there is kept. Left out, only how is printed",
           required=False),
    registrar=_registrar, summary=_summary, report=_report)
register = COMMAND.add
