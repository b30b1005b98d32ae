#!/usr/bin/env bash
# The main job on the embedded default (SQLite): start an app on a temporary home, register two agents,
# assign a task from one to the other, receive it, reply, read the correlated reply, print every record.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
W=".venv/bin/wardian"
export WARDIAN_HOME="$(mktemp -d /tmp/wardian-demo.XXXXXX)"
trap '"$W" app stop >/dev/null 2>&1 || true; rm -rf "$WARDIAN_HOME"' EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "start the app on $WARDIAN_HOME"
"$W" app start
"$W" agent add lead --provider codex
"$W" agent add reviewer --provider codex
"$W" agent list

say "lead assigns a task to reviewer"
eval "$("$W" agent env lead)"
request_id=$("$W" message task --to reviewer --json "Review the retry loop in client.py.
Is an uncertain send ever replayed? Answer yes or no, with one reason." | python3 -c 'import json,sys; print(json.load(sys.stdin)["request_id"])')
echo "request id: $request_id"
"$W" message send --to reviewer "FYI: the lead is waiting for your review (information, starts no work)."

say "reviewer waits, receives (the task is exposed as new work once), acknowledges and replies"
eval "$("$W" agent env reviewer)"
"$W" message wait --timeout-ms 1000
page=$("$W" message receive --json)
echo "$page" | python3 -c '
import json, sys
for r in json.load(sys.stdin)["records"]:
    print("  %-12s %s new_work=%s" % (r["kind"], r["id"], r["new_work"]))'
cursor=$(echo "$page" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cursor"])')
"$W" message receive --ack-cursor "$cursor"
"$W" message reply "$request_id" --status done "No. An uncertain delivery is reported as uncertain and never resent."

say "lead consumes the correlated reply"
eval "$("$W" agent env lead)"
"$W" message receive --timeout-ms 1000

say "every record in the store"
"$W" message log
"$W" app stop
