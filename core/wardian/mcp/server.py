"""`wardian mcp serve`: the eight messaging tools over stdio MCP, on the official SDK's low-level server.

```
stdin (dup of fd 0) -> stdin thread: decode_line -> Front --- constant answer -----------------------> writes
                             |                         |--- quick tools/call -> call pool | wait pool --> writes
                             |                         `--- everything else -> Inbox ---.
                             `-> malformed line: JSON-RPC error --------------------------------------> writes
SDK thread (started at once, imports the SDK): anyio loop <- Inbox, SDK session (mcp.server.lowlevel.Server) --> writes
writes -> stdout (dup of fd 1), one whole line at a time
main thread: waits for stdin EOF or the host's death (`_host.watch`), then `StdioServer.finish`
```

The modules, one job each: `_stdio` (the descriptors, whole-line writes, the line splitter), `_frames` (strict
decoding of one line), `_front` (the handshake and discovery answered from constant data, and the routing),
`_quick` (the quick path's tool calls on thread pools of this server), `_calls` (one tool call: arguments to one
app exchange to a result), `_book` (the requests in the SDK's hands and its waits), `_bridge` (the hand-over to
the SDK's thread), `_sdk` (the SDK's server and session) and `_host` (which process started this one, and its
death). This module wires them together.

The SDK costs over a second to import, and a host's handshake needs none of it: the stdin thread answers
`initialize`, `tools/list` and `ping` from constant data (`_front`) while the SDK server is imported and
started on its own thread. A plain `tools/call` of any of the eight tools runs on the quick path (`_quick`), with
the same result code as the SDK's handler: the SDK's per-call machinery cost more CPU per call than the app's
durable send, and a first wait served by the SDK waited for its import. Waits (`wait_agent`, `receive_messages`)
have a pool of their own, so a 60 s wait never delays a send. Every other message waits in the `Inbox`, in
arrival order, until the SDK's loop takes it.

Invariants:
- Nothing but protocol reaches the real stdout (`_stdio`); fd 0 is pointed at /dev/null. Logs go to stderr only.
  Lines are written whole, under one lock, whichever thread answers.
- Every malformed line gets a JSON-RPC error where the protocol allows one (`_frames`), and the server
  keeps serving.
- Discovery (`initialize`, `tools/list`) needs no WARDIAN_HOME, app or session and touches no file.
- The constant answers are the SDK's own (`_front`); the SDK sees the handshake replayed, so it serves
  `tools/call` as if it had answered `initialize` itself, and no request is answered twice.
- Tool failures are results with `isError: true` and `structuredContent.error`; only protocol faults are
  JSON-RPC errors. A call is sent to the app at most once (`_calls`).
- A request the host cancels (`notifications/cancelled`) gets no answer once the cancellation is processed, on
  either path: a quick call's answer is dropped when its app exchange ends
  (the exchange is never resent); a request handed to the SDK stops counting as outstanding at once and any
  answer the SDK still gives it is dropped (`_book.Outstanding`). A cancelled call may still have taken effect.
- A cancelled wait (`wait_agent`, `receive_messages`) frees its thread at once, on either path: its app exchange
  is aborted (`_calls.WaitExchange`: the quick path's `cancel`, the SDK's handler when the SDK cancels it), its
  connection is discarded, and the app, seeing the connection end, ends the wait and unsubscribes it
  (app/server.py). Only waits are aborted: any other call keeps its exchange to the end, as aborting a send could
  leave its delivery uncertain.
- Stdin EOF ends the server promptly: waits in flight, on either path, are abandoned at once like cancelled ones
  (aborted, never answered: nobody is left to wait for them); other requests handed to the SDK are still
  answered (the SDK is waited for if it is still starting, then calls get a short grace), other quick calls get
  the same grace, then the rest are abandoned (an admitted message stays admitted; the app never cancels
  admitted work). Without such requests the server exits at once, even while the SDK is still being imported.
  The death of the host (the MCP client that started it, found past wrapper shells and the onefile launcher, see
  `_host`) or of the direct parent ends it the same way, even while another process holds stdin open
  (within about 2 s). SIGTERM keeps its default action, so it ends the process at once (the kernel
  closes its app connections, which ends their waits in the app); the server starts no child processes.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from wardian.home import ENV_MCP_ANNOUNCE
from wardian.mcp._book import EOF_GRACE_S, Outstanding, SdkWaits
from wardian.mcp._bridge import Inbox, run_sdk
from wardian.mcp._frames import FrameError, JsonId, cancelled_request, decode_line, encode_message
from wardian.mcp._front import Front, Route
from wardian.mcp._host import parent_watched, watch
from wardian.mcp._quick import QuickPath
from wardian.mcp._stdio import StdioFds, read_lines
from wardian.protocol.jsonrpc import INTERNAL_ERROR

if TYPE_CHECKING:
    from wardian.mcp._calls import Caller

log = logging.getLogger("wardian.mcp")

# `WARDIAN_MCP_QUICK_PATH=0` sends every tools/call to the SDK (a diagnostic switch; tests compare both paths).
ENV_QUICK_PATH = "WARDIAN_MCP_QUICK_PATH"
# How long requests that arrived before stdin EOF wait for the SDK server to start (it imports in ~1-2 s).
SDK_START_TIMEOUT_S = 60.0


class StdioServer:
    """One stdio connection of `wardian mcp serve`: lines from the host in, whole JSON-RPC lines out through `write`.

    `main` wires it to the real stdin and stdout; the frame fuzz target (`tests/reliability/mcp_frames.py`) drives
    it in-process. `write` is called from several threads and must write each call's bytes whole.
    """

    def __init__(self, write: Callable[[bytes], None], environ: Mapping[str, str]) -> None:
        self._write = write
        self._environ = environ
        self.outstanding = Outstanding()
        self.front = Front(quick=environ.get(ENV_QUICK_PATH, "1") != "0")
        self.inbox = Inbox(self._reject)
        self._caller: Caller | None = None
        self._caller_lock = threading.Lock()
        self._finish_lock = threading.Lock()
        self._finished = False  # stdin ended (or the parent died): later lines are ignored
        self._announce = environ.get(ENV_MCP_ANNOUNCE) == "1"  # once, after the first `tools/list` was routed
        self.quick = QuickPath(write, self.caller)
        self.sdk_waits = SdkWaits(self.outstanding)
        self.sdk = threading.Thread(target=run_sdk, name="wardian-mcp-sdk", daemon=True,
                                    args=(write, self.caller, self.inbox, self.outstanding, self.front,
                                          self.sdk_waits))

    def caller(self) -> Caller:
        """The managed caller and its pooled app connections, shared by the SDK's handler and the quick path."""
        with self._caller_lock:
            if self._caller is None:
                from wardian.mcp._calls import Caller  # pydantic: not before the first call (a quick start)

                self._caller = Caller(self._environ)
            return self._caller

    def start(self) -> None:
        """Start the SDK server on its own thread (it imports the SDK); lines may be delivered at once."""
        self.sdk.start()

    def deliver(self, line: bytes) -> None:
        """Handle one line from the host (without its newline)."""
        if self._finished:
            # Only after the parent's death, while another process still holds stdin open: no one is left to answer.
            log.debug("ignored a line read after the server began to exit")
            return
        try:
            obj = decode_line(line)
        except FrameError as exc:
            self._write(encode_message(exc.response()))
            return
        if obj is None:
            return
        cancelled = cancelled_request(obj)
        if cancelled is not None:
            self._cancel(cancelled)
        route = self.front.route(obj, sdk_busy=bool(self.outstanding))
        if route.quick is not None:
            if self.quick.start(route.quick):
                return
            route = Route(forward=obj)  # every wait thread is taken: the SDK serves this one
        if route.answer is not None:
            self._write(route.answer)
            log.debug("answered %s from constant data", obj.get("method"))
        if route.forward is not None:
            if "method" in obj and "id" in obj and route.answer is None:
                self.outstanding.add(obj["id"])
                if not self.inbox.attached.is_set():
                    log.debug("%s waits for the SDK server to start", obj["method"])
            self.inbox.put(route.forward)  # a cancellation too: the SDK cancels its own handler of that request
        if self._announce and obj.get("method") == "tools/list":
            self._announce = False
            threading.Thread(target=self._announce_listed, name="wardian-mcp-announce", daemon=True).start()

    def _announce_listed(self) -> None:
        """Tell the app the host has the tools (`Caller.announce`), off the stdin thread, once the host's other
        requests are answered too (a host may register the tools only when its whole discovery is done: Qwen Code
        lists prompts and resources beside the tools, and the SDK answers those); a failure is logged only."""
        self.outstanding.wait_idle(SDK_START_TIMEOUT_S)
        try:
            self.caller().announce()
        except Exception as exc:  # a top-level thread: the host's tools work either way
            log.warning("could not tell the app this MCP server is connected: %s", exc)

    def wait_threads(self) -> int:
        """Threads held by waits now, on either path, those of cancelled waits included (diagnostics and tests)."""
        return self.quick.waits() + self.sdk_waits.threads

    def finish(self) -> None:
        """Stdin ended (or the parent died): waits are aborted at once, on either path, and never answered; other
        requests handed to the SDK are still answered, then the SDK server stops.

        It waits for the SDK to start (if it is still importing) and then for its grace; with no such request,
        there is nothing to wait for. Quick calls get the same grace. A second call returns once the first is done.
        """
        with self._finish_lock:
            if self._finished:
                return
            self._finished = True
            self.sdk_waits.abandon()  # first: an abandoned wait no longer counts as outstanding
            self.inbox.put(None)
            self.quick.finish()
            if not self.sdk_waits.wait_idle(EOF_GRACE_S):
                log.debug("%d aborted wait(s) of the SDK path still hold a thread", self.sdk_waits.threads)
            if self.outstanding or self.inbox.attached.is_set():
                self.sdk.join(SDK_START_TIMEOUT_S + 2 * EOF_GRACE_S if not self.inbox.attached.is_set()
                              else 2 * EOF_GRACE_S + 1)
            with self._caller_lock:
                caller = self._caller
            if caller is not None:
                caller.close()  # last: both paths have had their grace (a call ending later closes its own socket)

    def _cancel(self, request_id: JsonId) -> None:
        """The host cancelled `request_id`: whichever path has it answers nothing from now on."""
        quick = self.quick.cancel(request_id)
        sdk = self.outstanding.cancel(request_id)
        if quick or sdk:
            log.debug("the host cancelled request %r (%s)", request_id, "quick path" if quick else "SDK")

    def _reject(self, obj: dict[str, Any]) -> None:
        if "method" in obj and "id" in obj and obj["id"] != self.front.replay_id:
            line = encode_message({"jsonrpc": "2.0", "id": obj["id"], "error": {
                "code": INTERNAL_ERROR, "message": "Internal error: the MCP server could not start its SDK session"}})
            self.outstanding.answer(obj["id"], lambda: self._write(line))


def _watch_parent(on_death: Callable[[], None]) -> threading.Thread | None:
    """Call `on_death` once, from a daemon thread, when the host or the direct parent has died (`_host.watch`); no
    thread where the parent is not watched (`_host.parent_watched`: Windows)."""
    if not parent_watched(sys.platform):
        return None
    parent = os.getppid()
    thread = threading.Thread(target=watch, args=(parent, on_death), name="wardian-mcp-parent", daemon=True)
    thread.start()
    return thread


def main() -> int:
    """Entry point of `wardian mcp serve`; returns the process exit code."""
    ended = threading.Event()  # stdin reached EOF, or the host or the parent died
    fds = StdioFds()
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("WARDIAN_LOG_LEVEL", "WARNING").upper(),
                        format="wardian-mcp %(levelname)s %(name)s: %(message)s")
    watchdog = _watch_parent(ended.set)  # once logging is set up: its first line says which host it watches
    server = StdioServer(fds.write, dict(os.environ))
    server.start()
    failed = threading.Event()

    def read() -> None:
        # On a thread of its own, so the parent's death can end the server while a read blocks on a stdin that
        # another process keeps open.
        try:
            read_lines(fds.stdin, server.deliver)
        except Exception:
            log.exception("the MCP server failed")
            failed.set()
        finally:
            ended.set()

    threading.Thread(target=read, name="wardian-mcp-stdin", daemon=True).start()
    code = 0
    try:
        ended.wait()
        server.finish()
    except KeyboardInterrupt:
        code = 130
    except Exception:
        log.exception("the MCP server failed")
        code = 1
    if failed.is_set() and code == 0:
        code = 1
    sys.stderr.flush()
    if any(t.is_alive() for t in threading.enumerate() if t is not threading.main_thread() and t is not watchdog):
        # The SDK thread is still importing, a worker thread is still blocked in an app exchange abandoned at EOF, or
        # the stdin thread is blocked reading a stdin that outlived the parent; the interpreter would wait at exit
        # for the non-daemon ones (up to an exchange's timeout) or tear an import down mid-way, so leave without
        # either.
        os._exit(code)
    return code
