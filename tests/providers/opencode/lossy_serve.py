"""A stand-in `opencode` for one fault the real binary cannot produce on demand: an HTTP answer lost on the way.

`python lossy_serve.py --real PATH --mode MODE [opencode args…]` runs the real OpenCode with the given arguments.
For `serve`, it puts a loopback TCP relay in front of the real server: it reads the real "listening on" line,
prints its own address in the same words, and relays every byte both ways (the real wire format, /event stream
included), except for the first `POST …/prompt_async`:

- `drop_answer`: the request reaches OpenCode, its answer is swallowed and the client's connection closed;
- `drop_request`: the client's connection is closed before a byte of the request is relayed;
- `drop_answer_blind`: as `drop_answer`, and the app is kept from learning that the message arrived: every lookup of
  it (`GET /session/ID/message/MSG_ID`) is answered 503 by the relay, and every `/event` event naming it is left out,
  so the delivery is uncertain while the loop it started runs.

Everything else, the lookup that follows included, goes through untouched. The relay and the real serve share one
process group (the app's), so ending the group ends both.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import subprocess
import sys
import threading

LISTENING = "listening on "
_MESSAGE_ID = re.compile(rb'"messageID"\s*:\s*"(msg_[A-Za-z0-9]+)"')
_UNAVAILABLE = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"


class Relay:
    def __init__(self, upstream: tuple[str, int], mode: str) -> None:
        self.upstream = upstream
        self.mode = mode
        self.spent = threading.Lock()  # held once the fault was played
        self.hidden: bytes | None = None  # drop_answer_blind: the id of the message whose arrival is hidden
        self.server = socket.create_server(("127.0.0.1", 0))

    @property
    def port(self) -> int:
        return int(self.server.getsockname()[1])

    def serve(self) -> None:
        while True:
            client, _ = self.server.accept()
            threading.Thread(target=self._connection, args=(client,), daemon=True).start()

    def _connection(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream)
        swallow = threading.Event()
        events = threading.Event()  # this connection carries the /event stream
        threading.Thread(target=self._answers, args=(upstream, client, swallow, events), daemon=True).start()
        want_id = False  # drop_answer_blind: this connection's prompt_async body (its message id) is still to come
        try:
            while data := client.recv(65536):
                if want_id and (found := _MESSAGE_ID.search(data)) is not None:
                    self.hidden, want_id = found.group(1), False
                line = data.split(b"\r\n", 1)[0]
                if line.startswith(b"GET /event"):
                    events.set()
                if self.hidden is not None and line.startswith(b"GET ") and b"/message/" + self.hidden in line:
                    client.sendall(_UNAVAILABLE)  # the lookup of the hidden message never reaches OpenCode
                    continue
                if data.startswith(b"POST ") and b"/prompt_async " in line and self.spent.acquire(blocking=False):
                    if self.mode == "drop_request":
                        break
                    if self.mode == "drop_answer_blind":
                        found = _MESSAGE_ID.search(data)  # the body comes with the head, or in a later read
                        if found is not None:
                            self.hidden = found.group(1)
                        else:
                            want_id = True
                    swallow.set()
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    def _answers(self, upstream: socket.socket, client: socket.socket, swallow: threading.Event,
                 events: threading.Event) -> None:
        stream = _EventFilter(self)
        try:
            while data := upstream.recv(65536):
                if swallow.is_set():
                    break  # OpenCode answered; the client never hears it
                if events.is_set() and self.mode == "drop_answer_blind":
                    data = stream.feed(data)
                    if not data:
                        continue
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client, upstream)


class _EventFilter:
    """Re-frames an `/event` response (HTTP/1.1 chunked, as OpenCode sends it) with the events that name the hidden
    message left out: the head passes as it is, then each whole event goes out as a chunk of its own."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.head = True
        self.raw = b""  # undecoded bytes
        self.body = b""  # decoded bytes after the last whole event

    def feed(self, data: bytes) -> bytes:
        self.raw += data
        out = b""
        if self.head:
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return b""
            out, self.raw, self.head = self.raw[:end + 4], self.raw[end + 4:], False
        while (eol := self.raw.find(b"\r\n")) >= 0:
            size = int(self.raw[:eol].split(b";")[0], 16)
            if size == 0:
                return out + self._events() + b"0\r\n\r\n"
            if len(self.raw) < eol + 2 + size + 2:
                break
            self.body += self.raw[eol + 2:eol + 2 + size]
            self.raw = self.raw[eol + 2 + size + 2:]
        return out + self._events()

    def _events(self) -> bytes:
        *complete, self.body = self.body.split(b"\n\n")
        hidden = self.relay.hidden
        kept = [e + b"\n\n" for e in complete if hidden is None or hidden not in e]
        return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in kept)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--real", required=True)
    parser.add_argument("--mode", choices=("drop_answer", "drop_request", "drop_answer_blind"), required=True)
    args, rest = parser.parse_known_args()
    if not rest or rest[0] != "serve":
        os.execv(args.real, [args.real, *rest])
    proc = subprocess.Popen([args.real, *rest], stdout=subprocess.PIPE, text=True, encoding="utf-8")
    assert proc.stdout is not None
    for line in proc.stdout:
        if LISTENING in line:
            host, port = line.split(LISTENING, 1)[1].strip().removeprefix("http://").rsplit(":", 1)
            relay = Relay((host, int(port)), args.mode)
            threading.Thread(target=relay.serve, daemon=True).start()
            print(f"opencode server {LISTENING}http://127.0.0.1:{relay.port}", flush=True)
            break
        print(line, end="", flush=True)
    for line in proc.stdout:
        print(line, end="", flush=True)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
