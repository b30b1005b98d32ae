"""Wardian's extension for Pi is generated from the MCP server's tool table, so the two cannot drift
(docs/guide/pi.md#the-tools)."""

from __future__ import annotations

import json

from wardian.protocol.tools import TOOLS
from wardian.providers.pi import extension
from wardian.providers.pi.approvals import UNGRANTED


def test_the_shipped_extension_is_what_the_tool_table_makes() -> None:
    """Regenerate with `scripts/gen_pi_extension.py` after a change of `wardian.protocol.tools`."""
    assert extension.source() == extension.render(extension.source())


def test_its_table_has_every_tool_with_the_servers_name_description_and_schema() -> None:
    text = extension.source()
    start = text.index("const TOOLS = ") + len("const TOOLS = ")
    tools = json.loads(text[start:text.index(";\nconst ASKS")])
    assert [(t["name"], t["title"], t["description"], t["inputSchema"]) for t in tools] == [
        (t.name, t.title, t.description, t.input_schema) for t in TOOLS]
    asks = json.loads(text[text.index("const ASKS: string[] = ") + 23:].split(";", 1)[0])
    assert asks == [t.name for t in TOOLS if t.name not in UNGRANTED]
