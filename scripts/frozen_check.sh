#!/usr/bin/env bash
# Build the frozen CLI once (python build/freeze.py -> dist/wardian/wardian) and run the suites that must
# hold for it (docs/guide/frozen-builds.md): the MCP contract tests, the provider (registration, real `codex mcp list`)
# tests and the frozen smoke tests against the binary, then the MCP Inspector CLI as an independent client.
# Expects scripts/setup.sh --with-node to have run (scripts/test.sh does). Extra arguments go to pytest;
# WARDIAN_FREEZE_ARGS goes to build/freeze.py (`--source-rev HEAD` freezes the last commit, not the work tree).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
if [ -n "${WARDIAN_FROZEN_CLI:-}" ] && [ -x "$WARDIAN_FROZEN_CLI" ]; then
  cli="$WARDIAN_FROZEN_CLI"  # built already (scripts/test.sh builds once for both runs)
else
  .venv/bin/python build/freeze.py ${WARDIAN_FREEZE_ARGS:-}
  echo "frozen_check: build took $((SECONDS - started)) s" >&2
  cli="$PWD/dist/wardian/wardian"
fi
# The provider boundary's own tests (the process lifecycle, both registrations); the real-agent suites under
# tests/providers/codex and tests/providers/opencode already run once in the whole suite.
WARDIAN_TEST_CLI="$cli" WARDIAN_FROZEN_CLI="$cli" \
  .venv/bin/python -m pytest -n auto -p no:cacheprovider tests/mcp tests/providers/test_process.py \
  tests/providers/codex/test_registration.py tests/providers/opencode/test_registration.py tests/build "$@"
# Discovery needs no home or session; the Inspector must list every tool of protocol/tools.py, by name, from the
# frozen server.
listed="$(env -u WARDIAN_HOME -u WARDIAN_SESSION_ID timeout 300 \
  node_modules/.bin/mcp-inspector --cli "$cli" mcp serve --method tools/list)"
names="$(printf '%s' "$listed" | .venv/bin/python -c 'import json, sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin)["tools"])))')"
expected="$(.venv/bin/python -c 'from wardian.protocol.tools import TOOL_NAMES; print(" ".join(sorted(TOOL_NAMES)))')"
count="$(wc -w <<< "$names")"
if [ "$names" != "$expected" ]; then
  echo "frozen_check: mcp-inspector listed the tools [$names], expected [$expected]" >&2
  printf '%s\n' "$listed" >&2
  exit 1
fi
echo "frozen_check: mcp-inspector --cli listed $count tools from $cli" >&2
echo "frozen_check: done in $((SECONDS - started)) s" >&2
