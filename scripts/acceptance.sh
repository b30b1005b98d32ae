#!/usr/bin/env bash
# The scripted-model native acceptance (real Codex, OpenCode and Claude Code, offline): both modes of a Codex team,
# background (a later task after the owner exits) and attached_tui with the lifecycle checks, then four mixed teams (a
# Codex lead asking an OpenCode worker, an OpenCode lead asking a Codex worker, a Claude Code lead asking a Codex
# worker, a Codex lead asking a Claude Code worker), then two hosts on one PostgreSQL store
# (docs/guide/several-machines.md: a task, information and an interrupt across hosts, kill -9 of a host's app mid-task
# and its restart), then the ACP mixes as `wardian demo` runs (docs/guide/acp.md; about 10-25 s each): a Qwen Code or
# Gemini CLI agent with a Codex one either way round, a Qwen Code lead asking a Claude Code worker, and a generic ACP
# agent (`opencode acp`) with a Codex one either way round; then the Pi mixes (docs/guide/pi.md; about 15-20 s
# each): a Pi lead with a Codex worker and the reverse, a Pi lead asking a Claude Code worker. Each run prints where
# its evidence is.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
WARDIAN_E2E_MESSAGING_V2_MODE=background .venv/bin/run-native-e2e
WARDIAN_E2E_MESSAGING_V2_MODE=attached_tui WARDIAN_E2E_MESSAGING_V2_LIFECYCLE=1 .venv/bin/run-native-e2e
WARDIAN_E2E_MESSAGING_V2_PROVIDERS=codex,opencode .venv/bin/run-native-e2e
WARDIAN_E2E_MESSAGING_V2_PROVIDERS=opencode,codex .venv/bin/run-native-e2e
WARDIAN_E2E_MESSAGING_V2_PROVIDERS=claude,codex .venv/bin/run-native-e2e
WARDIAN_E2E_MESSAGING_V2_PROVIDERS=codex,claude .venv/bin/run-native-e2e
WARDIAN_E2E_REPORT_DIR="dist/e2e-reports/$(date +%Y%m%d-%H%M%S)-two-hosts-$$" .venv/bin/run-native-e2e e2e_native/tests/test_two_hosts_real_native.py
for mix in qwen,codex codex,qwen gemini,codex codex,gemini qwen,claude acp,codex codex,acp pi,codex codex,pi pi,claude; do
  .venv/bin/wardian demo --providers "$mix"
done
echo "acceptance.sh: seventeen runs (two modes, four mixed teams, two hosts on one PostgreSQL store, seven ACP mixes, three Pi mixes) passed in $((SECONDS - started)) s" >&2
