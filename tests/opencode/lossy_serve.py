"""A stand-in `opencode` for one fault the real binary cannot produce on demand: an HTTP answer lost on the way.

`python lossy_serve.py --real PATH --mode MODE [opencode args…]` runs the real OpenCode with the given arguments.
For `serve`, it puts a loopback TCP relay in front of the real server: it reads the real "listening on" line,
prints its own address in the same words, and relays every byte both ways (the real wire format, /event stream
included), except for the first `POST …/prompt_async`:

- `drop_answer`: the request reaches OpenCode, its answer is swallowed and the client's connection closed;
- `drop_request`: the client's connection is closed before a byte of the request is relayed.

Everything else, the lookup that follows included, goes through untouched. The relay and the real serve share one
process group (the app's), so ending the group ends both.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import threading

LISTENING = "listening on "


class Relay:
    def __init__(self, upstream: tuple[str, int], mode: str) -> None:
        self.upstream = upstream
        self.mode = mode
        self.spent = threading.Lock()  # held once the fault was played
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
        threading.Thread(target=self._answers, args=(upstream, client, swallow), daemon=True).start()
        try:
            while data := client.recv(65536):
                if data.startswith(b"POST ") and b"/prompt_async " in data.split(b"\r\n", 1)[0] \
                        and self.spent.acquire(blocking=False):
                    if self.mode == "drop_request":
                        break
                    swallow.set()
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    @staticmethod
    def _answers(upstream: socket.socket, client: socket.socket, swallow: threading.Event) -> None:
        try:
            while data := upstream.recv(65536):
                if swallow.is_set():
                    break  # OpenCode answered; the client never hears it
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client, upstream)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--real", required=True)
    parser.add_argument("--mode", choices=("drop_answer", "drop_request"), required=True)
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
