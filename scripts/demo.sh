#!/usr/bin/env bash
# The main job: install (Python packages and the pinned Codex from npm), then `wardian demo`: an app on a
# temporary home, two real Codex agents on the scripted model (offline, no account), one plain-English request,
# and the exchange shown as it happens. Everything it starts is stopped before it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-node
exec .venv/bin/wardian demo "$@"
