"""The protocol's limits and versions: plain constants, in a module of their own so that the client and the home
(the CLI's cold start, docs/benchmarks.md) read them without loading the records' dataclasses in wardian.model,
which re-exports them."""

from __future__ import annotations

MAX_RECEIVE_LIMIT = 100
DEFAULT_RECEIVE_LIMIT = 20
MAX_WAIT_MS = 60_000
DEFAULT_WAIT_MS = 60_000
MAX_MESSAGE_BYTES = 64 * 1024
MAX_TARGET_CHARS = 256
MAX_AGENT_NAME_CHARS = 64
MAX_CURSOR_CHARS = 512
MAX_REQUEST_ID_CHARS = 128
MAX_REASON_CHARS = 2000
"""The longest reason an approval's answer keeps (`wardian.approvals`)."""
# A receive page stops adding records once their text passes this many bytes (at least one record is
# always returned), so a page of 100 records of 64 KiB each cannot build a 6 MiB response.
MAX_PAGE_TEXT_BYTES = 1024 * 1024
# The console's exchange timeline shows this much of each record's text; the request view shows all of it
# (docs/guide/console.md#pages).
EXCHANGE_PREVIEW_CHARS = 400
# A one-time login URL of the web console works this long (wardian.console.auth); `wardian console` removes its private
# login pages in run/ once they are older (docs/guide/console.md#logging-in-and-the-security-model).
LOGIN_TTL_MS = 10 * 60 * 1000
# A page of the exchange filtered by participant searches at most this many records (by id) below its start.
EXCHANGE_WINDOW = 100_000
# The largest NDJSON frame the app reads from a client; larger frames get a JSON-RPC error.
MAX_REQUEST_FRAME_BYTES = 1024 * 1024
# The largest frame a client accepts from the app (a page is bounded by MAX_PAGE_TEXT_BYTES).
MAX_RESPONSE_FRAME_BYTES = 16 * 1024 * 1024
# The control socket's clients send their request as soon as they connect (the CLI, `AppClient`) and keep an idle
# connection only where they connect again once the app has closed it (`AppClient`, the MCP server's pool;
# docs/design/architecture.md, "Connections to the app"); a wait is a request in flight. So a connection silent for
# this long is leaked or hostile, and the app closes it (app/listen.py): that costs a legitimate client one new
# connection. A client on Windows also reads it (wardian.client).
CONTROL_IDLE_S = 10.0
# Extra time the client allows beyond a wait's own timeout before the exchange counts as lost.
CONTROL_GRACE_MS = 5_000
# Codex's per-server tool timeout that registration writes (rule CFG-4 of docs/design/contract.md). It must exceed
# the longest wait (MAX_WAIT_MS) plus the client's grace, so an expired wait is a result, not a timeout.
CODEX_TOOL_TIMEOUT_SEC = 70
# The control socket's protocol version. It is part of the socket's file name, so a client of another
# version finds no socket it can speak to and reports app_incompatible instead of sending a byte.
PROTOCOL_VERSION = 1
