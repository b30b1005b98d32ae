"""The load generators: raw NDJSON control connections with frames encoded once up front, and one epoll loop that
keeps one request in flight on each of many connections (no threads, no GIL hand-offs)."""

from __future__ import annotations

import selectors
import socket
import time
from typing import Any

import orjson


def frame(method: str, params: dict[str, Any], id_: int = 1) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + b"\n"


class RawConn:
    """One control connection without the client's conveniences: send a prepared frame, read lines."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_line(self, timeout_s: float = 30.0) -> bytes:
        self.sock.settimeout(timeout_s)
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("the app closed the connection")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def result(self, timeout_s: float = 30.0) -> Any:
        response = orjson.loads(self.read_line(timeout_s))
        if "error" in response:
            raise RuntimeError(f"app error: {response['error']}")
        return response["result"]

    def close(self) -> None:
        self.sock.close()


def drive_senders(path: str, frames: list[bytes], duration_s: float) -> tuple[int, int, list[float]]:
    """Each frame on its own connection, sent again as soon as its answer arrives, for `duration_s`.

    Returns (answers, errors, latencies of every answered request).
    """
    return drive_connections([(path, data) for data in frames], duration_s)


def drive_connections(targets: list[tuple[str, bytes]], duration_s: float) -> tuple[int, int, list[float]]:
    """As `drive_senders`, each (socket path, frame) on its own connection: the senders may talk to several apps."""
    sel = selectors.EpollSelector()
    conns: dict[int, tuple[socket.socket, bytes]] = {}
    for path, data in targets:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.setblocking(False)
        conns[s.fileno()] = (s, data)
        sel.register(s, selectors.EVENT_READ)
    started: dict[int, float] = {}
    latencies: list[float] = []
    answers = errors = 0
    end = time.perf_counter() + duration_s
    for fd, (s, data) in conns.items():
        started[fd] = time.perf_counter()
        s.send(data)
    outstanding = len(conns)
    while outstanding:
        for key, _ in sel.select(timeout=30):
            s, data = conns[key.fd]
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError("the app closed a sender's connection")
            # One request in flight per connection, so a chunk holds at most one answer line.
            if not chunk.endswith(b"\n"):
                while not chunk.endswith(b"\n"):
                    more = s.recv(65536)
                    if not more:
                        raise EOFError("the app closed a sender's connection")
                    chunk += more
            now = time.perf_counter()
            latencies.append(now - started[key.fd])
            answers += 1
            if b'"error"' in chunk:
                errors += 1
            if now < end:
                started[key.fd] = now
                s.send(data)
            else:
                outstanding -= 1
    for s, _ in conns.values():
        s.close()
    sel.close()
    return answers, errors, latencies
