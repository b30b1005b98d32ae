"""Who is at the other end of a connected Unix socket: the one place that asks the kernel, for the app (which drops a
client of another uid) and for the client (which refuses to talk to a listener of another uid).

The kernel answers with the peer's effective uid as it was when the peer called `connect()` (the app's view) or
`listen()` (the client's view), so neither side can be fooled by a process that changes its uid later.

- Linux: `getsockopt(SOL_SOCKET, SO_PEERCRED)` fills a `struct ucred {pid_t pid; uid_t uid; gid_t gid;}`
  (unix(7), https://man7.org/linux/man-pages/man7/unix.7.html). This is the path the tests run.
- macOS, FreeBSD, DragonFly: Python has no `getpeereid`; it is `getsockopt(0 /* SOL_LOCAL */, LOCAL_PEERCRED)`
  filling a `struct xucred {u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]; ...}`, which is
  exactly what libc's `getpeereid(3)` does there (FreeBSD `lib/libc/gen/getpeereid.c`,
  https://cgit.freebsd.org/src/tree/lib/libc/gen/getpeereid.c; Apple's Libc does the same). The kernels copy out
  `min(our buffer, sizeof(struct xucred))`, so one buffer large enough for either layout (FreeBSD 13 appended a
  pointer-sized union) fits both; only `cr_version` and `cr_uid`, the first two fields, are read. Written from those
  headers and sources, not run here: the project's CI runs Linux only.
- Elsewhere (Windows has no AF_UNIX control socket today; OpenBSD and NetBSD use other layouts): None, and the
  caller decides.
"""

from __future__ import annotations

import socket
import struct
import sys

_LINUX = sys.platform.startswith("linux")
_XUCRED = sys.platform == "darwin" or sys.platform.startswith(("freebsd", "dragonfly"))

# struct ucred: pid_t (signed), uid_t, gid_t (unsigned), 32 bits each.
_UCRED = struct.Struct("=iII")
# <sys/un.h>: SOL_LOCAL is 0 and LOCAL_PEERCRED 0x001 on macOS and the BSDs above.
_SOL_LOCAL = 0
_LOCAL_PEERCRED = 0x001
# <sys/ucred.h>: the first two fields of struct xucred, and the only version there is.
_XUCRED_HEAD = struct.Struct("=II")
_XUCRED_VERSION = 0
_XUCRED_BUFFER = 128  # more than sizeof(struct xucred) on every platform above (76 or 88 bytes)


def peer_uid(sock: socket.socket) -> int | None:
    """The effective uid of the process at the other end of the connected Unix socket `sock`; None where this
    platform has no way to tell.

    Raises:
        OSError: the kernel refused to tell (the socket is not a connected Unix socket), or answered in a layout
            this code does not know.
    """
    if _LINUX:
        _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
        return int(uid)
    if _XUCRED:
        raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_BUFFER)
        if len(raw) < _XUCRED_HEAD.size:
            raise OSError(f"LOCAL_PEERCRED answered {len(raw)} bytes, less than a struct xucred")
        version, uid = _XUCRED_HEAD.unpack_from(raw)
        if version != _XUCRED_VERSION:
            raise OSError(f"LOCAL_PEERCRED answered struct xucred version {version}, not {_XUCRED_VERSION}")
        return int(uid)
    return None
