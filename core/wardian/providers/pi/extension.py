"""Wardian's extension for Pi (`wardian.ts`, shipped beside this module): its tool table is generated from the MCP
server's (`wardian.protocol.tools.TOOLS`: names, titles, descriptions, input schemas), with the tools its approval
hook asks about (`approvals.UNGRANTED` are not asked), so the two cannot drift: `tests/providers/pi/test_extension.py`
fails when the shipped file is not what `render` makes of it (regenerate with `scripts/gen_pi_extension.py`).
"""

from __future__ import annotations

import json
from pathlib import Path

from wardian.protocol.tools import TOOLS
from wardian.providers.pi.approvals import UNGRANTED

PATH = Path(__file__).with_name("wardian.ts")
BEGIN = "// BEGIN GENERATED tool table\n"
END = "// END GENERATED tool table\n"


def table() -> str:
    """The generated part: the eight tools as `tools/list` shows them (without annotations), and those it asks about."""
    tools = [{"name": t.name, "title": t.title, "description": t.description, "inputSchema": t.input_schema}
             for t in TOOLS]
    asks = [t.name for t in TOOLS if t.name not in UNGRANTED]
    return (f"const TOOLS = {json.dumps(tools, indent=2, ensure_ascii=False)};\n"
            f"const ASKS: string[] = {json.dumps(asks)};\n")


def render(text: str) -> str:
    """`text` (the extension's source) with its generated part made anew."""
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + BEGIN + table() + END + tail


def source() -> str:
    return PATH.read_text(encoding="utf-8")
