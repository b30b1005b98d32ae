#!/usr/bin/env bash
# The scripted-model native acceptance (real Codex and OpenCode, offline): both modes of a Codex team, background (a
# later task after the owner exits) and attached_tui with the lifecycle checks, then both mixed teams (a Codex lead
# asking an OpenCode worker, an OpenCode lead asking a Codex worker). Each run prints where its evidence report is.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
WARDIAN_E2E_MESSAGING_V2_MODE=background .venv/bin/run-native-e2e
WARDIAN_E2E_MESSAGING_V2_MODE=attached_tui WARDIAN_E2E_MESSAGING_V2_LIFECYCLE=1 .venv/bin/run-native-e2e
WARDIAN_E2E_MESSAGING_V2_PROVIDERS=codex,opencode .venv/bin/run-native-e2e
WARDIAN_E2E_MESSAGING_V2_PROVIDERS=opencode,codex .venv/bin/run-native-e2e
echo "acceptance.sh: four runs (two modes, two mixed teams) passed in $((SECONDS - started)) s" >&2
