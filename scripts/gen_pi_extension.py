"""Regenerate the tool table of Pi's wardian extension (`core/wardian/providers/pi/wardian.ts`) from the MCP server's;
`--check` exits 1 when the shipped file differs."""

from __future__ import annotations

import sys

from wardian.providers.pi import extension


def main(argv: list[str]) -> int:
    current = extension.source()
    wanted = extension.render(current)
    if "--check" in argv:
        if current != wanted:
            print(f"{extension.PATH} is stale: run scripts/gen_pi_extension.py", file=sys.stderr)
            return 1
        return 0
    extension.PATH.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
