"""Who owns what on Windows: the user SID of this process and of another, and owner-only access control lists for the
control pipe and the home (ctypes on advapi32 and kernel32, no pywin32). The Windows edition of the uid checks that
`wardian.peercred` and the file modes make on POSIX (contract rule HOME-5, docs/design/contract.md).

Invariants:
- A user is compared by SID string (`S-1-5-21-…`), read from a process token, never from a name or an environment
  variable.
- An owner-only descriptor is `D:P(A;;GA;;;<sid>)`: protected (nothing inherited from the parent folder) and one
  entry, all access for the user; no other user, group or Everyone. For a folder its entry is inheritable
  (`OICI`), so what the app creates inside is the owner's alone too.
- A DACL is private when every allow entry names this user, SYSTEM or the Administrators group (which can read
  anything on Windows whatever the list says); a NULL DACL (everyone may do anything) is not.

Imports anywhere (the DLLs are loaded on first use), so core's Linux tests import it; only Windows calls it.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

TOKEN_QUERY = 0x0008
TOKEN_USER_CLASS = 1  # TokenUser
PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
SDDL_REVISION_1 = 1
OWNER_SECURITY_INFORMATION = 0x1
DACL_SECURITY_INFORMATION = 0x4
PROTECTED_DACL_SECURITY_INFORMATION = 0x80000000
SE_FILE_OBJECT = 1
SE_KERNEL_OBJECT = 6
# Who may appear in a private DACL besides the user: the OS itself and the machine's administrators, who can take any
# file anyway (well-known SIDs, https://learn.microsoft.com/windows/win32/secauthz/well-known-sids).
TRUSTED_SIDS = frozenset({"SY", "BA", "S-1-5-18", "S-1-5-32-544", "OW"})
# An allow entry of an SDDL string: (A;flags;rights;object;inherit-object;SID).
_ALLOW = re.compile(r"\(A;[^;]*;[^;]*;[^;]*;[^;]*;([^)]*)\)")


class SECURITY_ATTRIBUTES(ctypes.Structure):  # the Win32 name
    _fields_ = (("nLength", ctypes.c_uint32), ("lpSecurityDescriptor", ctypes.c_void_p),
                ("bInheritHandle", ctypes.c_int))


def _dlls() -> tuple[Any, Any]:
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]  # Windows only
    advapi32 = ctypes.WinDLL("advapi32", use_last_error=True)  # type: ignore[attr-defined]
    kernel32.GetCurrentProcess.restype = ctypes.c_void_p
    kernel32.OpenProcess.restype = ctypes.c_void_p
    kernel32.LocalFree.argtypes = (ctypes.c_void_p,)
    advapi32.GetSecurityInfo.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, *(ctypes.c_void_p,) * 5)
    advapi32.GetNamedSecurityInfoW.argtypes = (ctypes.c_wchar_p, ctypes.c_int, ctypes.c_uint32,
                                               *(ctypes.c_void_p,) * 5)
    return kernel32, advapi32


def _fail(what: str) -> OSError:
    code = ctypes.get_last_error()  # type: ignore[attr-defined]  # Windows only
    return OSError(code, f"{what} failed (Windows error {code})")


def _token_sid(process: int) -> str:
    kernel32, advapi32 = _dlls()
    token = ctypes.c_void_p()
    if not advapi32.OpenProcessToken(ctypes.c_void_p(process), TOKEN_QUERY, ctypes.byref(token)):
        raise _fail("OpenProcessToken")
    try:
        size = ctypes.c_uint32()
        advapi32.GetTokenInformation(token, TOKEN_USER_CLASS, None, 0, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        if not advapi32.GetTokenInformation(token, TOKEN_USER_CLASS, buf, size, ctypes.byref(size)):
            raise _fail("GetTokenInformation")
        sid = ctypes.c_void_p.from_buffer(buf).value  # TOKEN_USER starts with the SID's pointer
        text = ctypes.c_wchar_p()
        if not advapi32.ConvertSidToStringSidW(ctypes.c_void_p(sid), ctypes.byref(text)):
            raise _fail("ConvertSidToStringSidW")
        try:
            return str(text.value)
        finally:
            kernel32.LocalFree(text)
    finally:
        kernel32.CloseHandle(token)


def user_sid() -> str:
    """The SID of the user this process runs as.

    Raises:
        OSError: the token cannot be read.
    """
    kernel32, _ = _dlls()
    return _token_sid(kernel32.GetCurrentProcess())


def process_user_sid(pid: int) -> str:
    """The SID of the user process `pid` runs as.

    Raises:
        OSError: the process cannot be opened (gone, or of another user who denies it) or its token read.
    """
    kernel32, _ = _dlls()
    process = kernel32.OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not process:
        raise _fail(f"OpenProcess({pid})")
    try:
        return _token_sid(process)
    finally:
        kernel32.CloseHandle(ctypes.c_void_p(process))


def owner_only_sddl(sid: str, *, folder: bool = False) -> str:
    """The SDDL of a protected DACL that lets `sid` alone in (inherited by what a folder holds when `folder`)."""
    return f"D:P(A;{'OICI' if folder else ''};{'FA' if folder else 'GA'};;;{sid})"


class OwnerOnly:
    """Security attributes whose descriptor admits this user alone, kept alive as long as this object (the pipe
    server passes `address` to CreateNamedPipe for each instance)."""

    def __init__(self, sid: str) -> None:
        kernel32, advapi32 = _dlls()
        self._kernel32 = kernel32
        self._descriptor = ctypes.c_void_p()
        if not advapi32.ConvertStringSecurityDescriptorToSecurityDescriptorW(
                owner_only_sddl(sid), SDDL_REVISION_1, ctypes.byref(self._descriptor), None):
            raise _fail("ConvertStringSecurityDescriptorToSecurityDescriptorW")
        self.attributes = SECURITY_ATTRIBUTES(ctypes.sizeof(SECURITY_ATTRIBUTES), self._descriptor.value, 0)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.attributes)

    def close(self) -> None:
        if self._descriptor.value:
            self._kernel32.LocalFree(self._descriptor)
            self._descriptor = ctypes.c_void_p()


def _sddl(descriptor: ctypes.c_void_p, what: str) -> str:
    kernel32, advapi32 = _dlls()
    text = ctypes.c_wchar_p()
    try:
        if not advapi32.ConvertSecurityDescriptorToStringSecurityDescriptorW(
                descriptor, SDDL_REVISION_1, OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
                ctypes.byref(text), None):
            raise _fail(f"ConvertSecurityDescriptorToStringSecurityDescriptorW ({what})")
        return str(text.value)
    finally:
        kernel32.LocalFree(text)
        kernel32.LocalFree(descriptor)


def handle_sddl(handle: int) -> str:
    """The owner and DACL of a kernel object (a pipe instance), as SDDL.

    Raises:
        OSError: Windows would not say.
    """
    _, advapi32 = _dlls()
    descriptor = ctypes.c_void_p()
    rc = advapi32.GetSecurityInfo(handle, SE_KERNEL_OBJECT, OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
                                  None, None, None, None, ctypes.byref(descriptor))
    if rc:
        raise OSError(rc, f"GetSecurityInfo failed (Windows error {rc})")
    return _sddl(descriptor, "pipe")


def path_sddl(path: str) -> str:
    """The owner and DACL of a file or folder, as SDDL.

    Raises:
        OSError: Windows would not say (missing, or not readable by this user).
    """
    _, advapi32 = _dlls()
    descriptor = ctypes.c_void_p()
    rc = advapi32.GetNamedSecurityInfoW(path, SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
                                        None, None, None, None, ctypes.byref(descriptor))
    if rc:
        raise OSError(rc, f"GetNamedSecurityInfoW({path}) failed (Windows error {rc})")
    return _sddl(descriptor, path)


def others_allowed(sddl: str, sid: str) -> list[str]:
    """The SIDs besides `sid` (and the OS and its administrators) that the DACL of `sddl` lets in; `["everyone"]` for
    a missing or NULL DACL."""
    _, found, dacl = sddl.partition("D:")
    if not found or "NO_ACCESS_CONTROL" in dacl:
        return ["everyone"]
    return sorted({who for who in _ALLOW.findall(dacl) if who != sid and who not in TRUSTED_SIDS})


def make_private(path: str, sid: str) -> None:
    """Give the folder or file `path` a protected DACL that lets `sid` alone in.

    Raises:
        OSError: Windows refused it.
    """
    kernel32, advapi32 = _dlls()
    descriptor = ctypes.c_void_p()
    folder_sddl = owner_only_sddl(sid, folder=True)
    if not advapi32.ConvertStringSecurityDescriptorToSecurityDescriptorW(
            folder_sddl, SDDL_REVISION_1, ctypes.byref(descriptor), None):
        raise _fail("ConvertStringSecurityDescriptorToSecurityDescriptorW")
    try:
        if not advapi32.SetFileSecurityW(path, DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                                         descriptor):
            raise _fail(f"SetFileSecurityW({path})")
    finally:
        kernel32.LocalFree(descriptor)
