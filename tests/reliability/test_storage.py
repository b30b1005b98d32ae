"""Storage faults (docs/reliability.md row D5) and homes on network filesystems (D10).

D5 uses real faults on a private tmpfs mounted over the home (root only; skipped where mount is refused):
a full filesystem (ENOSPC -> SQLITE_FULL), the filesystem remounted read-only (EROFS), and the store's files
deleted under the running app. `chmod 0500` (the obvious way to fake it) does not stop root, which CI is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import short_home, wardian_cmd
from tests.reliability.world import AppHandle, call_outcome, db_rows, integrity_ok, report, start_with, stop
from wardian import errors
from wardian.home import Home, check_local_filesystem, filesystem_type
from wardian.home_setup import prepare_home

FAILING_SENDS = 5


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True, timeout=30).returncode == 0


@pytest.fixture
def tmpfs_home() -> Iterator[Path]:
    root = short_home("wf")
    if os.geteuid() != 0 or shutil.which("mount") is None or not _mount("-t", "tmpfs", "-o", "size=8m,mode=0700",
                                                                          "tmpfs", str(root)):
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip("needs root and permission to mount a tmpfs")
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], capture_output=True, timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def started_pair(root: Path) -> tuple[AppHandle, str]:
    app = start_with(root)
    app.call("agent/add", {"name": "lead", "provider": "codex"})
    app.call("agent/add", {"name": "worker", "provider": "codex"})
    lead = app.call("agent/session", {"agent": "lead"})["session_id"]
    app.call("message/send", {"session": lead, "target": "worker", "message": "before the fault"})
    return app, lead


def fill(root: Path) -> Path:
    """Take every free block of the filesystem with one file."""
    filler = root / "filler"
    # Unbuffered: a buffered file keeps the bytes of a short write and raises ENOSPC again when it is closed, which
    # depends on how the free space happens to align with the chunks.
    with filler.open("wb", buffering=0) as f:
        chunk = b"\0" * 65536
        try:
            while f.write(chunk):
                pass
        except OSError:
            pass
    return filler


def failing_sends(app: AppHandle, lead: str, tag: str) -> list[dict[str, object]]:
    out = []
    for i in range(FAILING_SENDS):
        outcome, exc = call_outcome(app.client, "message/send", {"session": lead, "target": "worker",
                                                                 "message": f"{tag}-{i}"})
        assert outcome == "not_admitted", (outcome, exc)
        assert isinstance(exc, errors.StorageError)
        out.append(exc.to_data())
    return out


def test_a_full_disk_admits_nothing_keeps_the_app_alive_and_heals(tmpfs_home: Path) -> None:
    """D5 (SQLITE_FULL, here a real ENOSPC): each send while the filesystem is full fails
    with storage_full and delivery not_admitted; 0 partial rows; the app's pid is unchanged; the first send
    after space is freed succeeds; integrity_check ok."""
    root = tmpfs_home
    app, lead = started_pair(root)
    pid = app.call("app/status")["pid"]
    try:
        filler = fill(root)
        seen = failing_sends(app, lead, "full")
        filler.unlink()
        assert {e["code"] for e in seen} == {"storage_full"}
        assert {e["delivery"] for e in seen} == {"not_admitted"}
        assert app.call("app/status")["pid"] == pid
        receipt = app.call("message/send", {"session": lead, "target": "worker", "message": "after the fault"})
        assert receipt["delivery"] == "admitted"
    finally:
        stop(app)
    ok = integrity_ok(root)
    partial = db_rows(root, "SELECT count(*) FROM interactions WHERE body LIKE 'full-%'")[0][0]
    report("D5 io_error storage_full", rounds=FAILING_SENDS, duplicated=partial, integrity_failures=int(not ok))
    assert ok
    assert partial == 0


def test_a_read_only_home_is_refused_at_startup_with_a_clear_error(tmpfs_home: Path) -> None:
    """D5 (SQLITE_READONLY): a home whose filesystem is read-only (remounted ro while the app
    was stopped; a running app's open store keeps the remount busy) is refused with a wardian error and no
    traceback; once writable again, the app starts and admits."""
    root = tmpfs_home
    app, lead = started_pair(root)
    stop(app)
    assert _mount("-o", "remount,ro", str(root))
    try:
        refused = subprocess.run([*wardian_cmd(), "app", "run", "--home", str(root)], capture_output=True,
                                 text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                             if not k.startswith("WARDIAN_")})
    finally:
        assert _mount("-o", "remount,rw", str(root))
    app = start_with(root)
    try:
        assert app.call("message/send", {"session": lead, "target": "worker", "message": "after"})["delivery"] == (
            "admitted")
    finally:
        stop(app)
    assert integrity_ok(root)
    assert "Traceback" not in refused.stderr
    assert refused.returncode in (6, 7), refused.stderr
    assert "storage_unavailable" in refused.stderr or "read-only" in refused.stderr


def test_deleting_the_store_under_a_running_app_admits_nothing(tmpfs_home: Path) -> None:
    """D5 (CANTOPEN, a deleted store): once wardian.db is gone from the home, a send must not
    be acknowledged (a receipt would promise a record that no later app can read): storage_unavailable,
    not_admitted, the app alive."""
    root = tmpfs_home
    app, lead = started_pair(root)
    pid = app.call("app/status")["pid"]
    try:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{root / 'wardian.db'}{suffix}").unlink(missing_ok=True)
        outcome, value = call_outcome(app.client, "message/send", {"session": lead, "target": "worker",
                                                                   "message": "into the void"})
        assert app.call("app/status")["pid"] == pid
    finally:
        stop(app)
    assert outcome == "not_admitted", value
    assert isinstance(value, errors.StorageError)


# --- D10: a home on a network filesystem is refused ------------------------------------------------------

MOUNTINFO = r"""22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
61 27 0:52 / /srv/nfs rw,relatime shared:30 - nfs4 server:/export rw,vers=4.2,addr=10.0.0.2
62 61 0:53 / /srv/nfs/local rw,relatime - ext4 /dev/vdb rw
63 27 0:54 / /mnt/my\040share rw,nosuid,nodev - cifs //host/share rw,vers=3.1.1
64 27 0:55 / /home/u/remote rw,nosuid,nodev,relatime - fuse.sshfs u@host:/ rw,user_id=0
65 27 0:56 / /data rw - ext4 /dev/vdc rw
66 27 0:57 / /data rw - nfs host:/data rw
"""


@pytest.mark.parametrize(("path", "fstype"), [
    ("/srv/nfs/home", "nfs4"),
    ("/srv/nfs", "nfs4"),
    ("/srv/nfs/local/home", "ext4"),  # a local disk mounted inside an NFS tree is local
    ("/mnt/my share/w", "cifs"),  # mountinfo escapes the space as \040
    ("/home/u/remote/.wardian", "fuse.sshfs"),
    ("/data/w", "nfs"),  # mounted over the ext4 at the same point: the later line wins
    ("/srvx/nfs", "ext4"),  # a prefix of the string is not a parent directory
    ("/home/u", "ext4"),
])
def test_the_filesystem_of_a_path_is_the_longest_mount_point_containing_it(path: str, fstype: str) -> None:
    """D10: the mountinfo parser (proc(5)) picks the mount that holds the path."""
    assert filesystem_type(Path(path), MOUNTINFO) == fstype


@pytest.mark.parametrize("path", ["/srv/nfs/home", "/mnt/my share/w", "/home/u/remote/.wardian", "/data/w"])
def test_a_home_on_a_network_filesystem_is_refused_with_unsupported_filesystem(tmp_path: Path, path: str) -> None:
    """D10, HOME-3: SQLite's WAL needs one host and a local disk, no network filesystem."""
    fake = tmp_path / "mountinfo"
    fake.write_text(MOUNTINFO.replace(" / / rw", f" / {tmp_path} rw").replace("/srv", f"{tmp_path}/srv")
                    .replace("/mnt", f"{tmp_path}/mnt").replace("/home", f"{tmp_path}/home")
                    .replace("/data", f"{tmp_path}/data"), encoding="utf-8")
    for mount_point in ("srv/nfs", "mnt/my share", "home/u/remote", "data"):
        (tmp_path / mount_point).mkdir(parents=True)
    target = Path(f"{tmp_path}{path}")
    with pytest.raises(errors.UnsupportedFilesystem) as exc:
        check_local_filesystem(target, fake)
    assert exc.value.code == "unsupported_filesystem"
    assert exc.value.field == "home"
    assert not target.exists()  # refused before anything is created


def test_a_missing_mountinfo_skips_the_check(tmp_path: Path) -> None:
    """Elsewhere than Linux there is no /proc/self/mountinfo: nothing is refused."""
    check_local_filesystem(tmp_path, tmp_path / "absent")


def test_the_app_refuses_to_prepare_a_home_on_a_network_filesystem(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """D10: `wardian app run` prepares the home through prepare_home, which refuses
    (and creates nothing) when the OS reports the home on nfs; the real mount table here is local."""
    home = Home(tmp_path / "w")
    prepare_home(home)  # this machine's real /proc/self/mountinfo: local
    fake = tmp_path / "mountinfo"
    (tmp_path / "n").mkdir()
    fake.write_text(f"61 1 0:52 / {tmp_path / 'n'} rw - nfs host:/n rw\n", encoding="utf-8")
    monkeypatch.setattr("wardian.home.MOUNTINFO", fake)
    nfs_home = Home(tmp_path / "n" / "w")
    with pytest.raises(errors.UnsupportedFilesystem):
        prepare_home(nfs_home)
    assert not nfs_home.root.exists()
