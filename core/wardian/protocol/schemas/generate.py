"""The JSON Schemas of the protocol, generated from the tables that define it, so a client written without this
package (another language, an MCP host) has the same bounds the app enforces.

One standalone JSON Schema document per file, beside this module:
- `method.<name>.params.json` and `method.<name>.result.json` for every app method (`/` in its name becomes `.`),
  from its params model and its closed result TypedDict;
- `tool.<name>.input.json` and `tool.<name>.output.json` for every MCP tool: its `inputSchema` exactly as
  `tools/list` shows it, and the result of the app method it forwards to, which is the tool's structured content
  when the call succeeds (a failed call is `isError` with `{"error": {...}}` instead).

The output is deterministic (sorted keys, two-space indent, a trailing newline), so the drift test can compare
bytes: a checked-in file that differs from what the tables give now means the protocol changed without them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from wardian.protocol.methods import METHODS
from wardian.protocol.tools import TOOLS

SCHEMA_DIR = Path(__file__).resolve().parent
DIALECT = "https://json-schema.org/draft/2020-12/schema"
REGENERATE = "python -m wardian.protocol.schemas"


def _document(schema: dict[str, Any], comment: str) -> dict[str, Any]:
    return {"$schema": DIALECT, "$comment": comment, **schema}


def _result_schema(method: str) -> dict[str, Any]:
    return TypeAdapter(METHODS[method].result).json_schema()


def schemas() -> dict[str, dict[str, Any]]:
    """Every schema document by its file name."""
    out: dict[str, dict[str, Any]] = {}
    for name, spec in METHODS.items():
        stem = "method." + name.replace("/", ".")
        out[f"{stem}.params.json"] = _document(spec.params.model_json_schema(), f"The params of {name}: {spec.doc}")
        out[f"{stem}.result.json"] = _document(_result_schema(name), f"The result of {name}: {spec.doc}")
    for tool in TOOLS:
        stem = f"tool.{tool.name}"
        out[f"{stem}.input.json"] = _document(tool.input_schema, f"The arguments of the MCP tool {tool.name}.")
        out[f"{stem}.output.json"] = _document(
            _result_schema(tool.method), f"The structured content of a successful {tool.name} call ({tool.method}).")
    return out


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def drift(directory: Path = SCHEMA_DIR) -> list[str]:
    """The file names under `directory` that differ from the generated schemas: changed, missing or stale."""
    expected = {name: render(doc) for name, doc in schemas().items()}
    present = {p.name for p in directory.glob("*.json")}
    changed = [name for name, text in expected.items()
               if name not in present or (directory / name).read_text(encoding="utf-8") != text]
    return sorted([*changed, *(present - expected.keys())])


def write(directory: Path = SCHEMA_DIR) -> list[str]:
    """Write every schema under `directory` and remove the files no method or tool has any more; the names
    written or removed."""
    touched = drift(directory)
    expected = schemas()
    for name in touched:
        path = directory / name
        if name in expected:
            path.write_text(render(expected[name]), encoding="utf-8")
        else:
            path.unlink()
    return touched


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description="Write the protocol's JSON Schemas.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a schema file drifted")
    parser.add_argument("--dir", type=Path, default=SCHEMA_DIR,
                        help="the folder of the schema files (default: the one in this package)")
    args = parser.parse_args(argv)
    directory: Path = args.dir
    if args.check:
        drifted = drift(directory)
        for name in drifted:
            print(f"drifted: {name}")
        if drifted:
            print(f"regenerate with: {REGENERATE}")
        return 1 if drifted else 0
    for name in write(directory):
        print(f"updated: {name}")
    return 0
