#!/usr/bin/env bash
# The scripted-model native acceptance in both modes (real Codex, offline): background (a later task after the
# owner exits) and attached_tui with the lifecycle checks. Each run prints where its evidence report is.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
WARDIAN_E2E_MESSAGING_V2_MODE=background .venv/bin/run-native-e2e
WARDIAN_E2E_MESSAGING_V2_MODE=attached_tui WARDIAN_E2E_MESSAGING_V2_LIFECYCLE=1 .venv/bin/run-native-e2e
echo "acceptance.sh: both modes passed in $((SECONDS - started)) s" >&2
