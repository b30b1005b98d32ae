"""A test that times out before it stops its app leaves no app running, with either of pytest-timeout's methods.

Each case runs a tiny test in a pytest of its own: a fixture starts a real `wardian app run` (and, like a test
that never reached its stop, has no teardown), the test records the app's pid and hangs past its timeout. With the
`signal` method the timed-out pytest ends normally and its exit ends the app; with the `thread` method it ends at
once (`os._exit`), and the next session's sweep (`reap_orphan_apps`, run at every session start and finish) ends it.
The app is checked by the pid and start time it recorded, never by name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.conftest import wardian_cmd
from wardian_harness.processes import app_records
from wardian_harness.processes.apps import fresh_home
from wardian_harness.processes.owner import Owner

INNER = textwrap.dedent("""
    import os
    import threading
    from pathlib import Path

    import pytest

    from wardian_harness.processes import apps

    @pytest.fixture
    def app_pid():
        proc = apps.start(Path(os.environ["INNER_HOME"]), command=os.environ["INNER_CLI"].split("\\x1f"))
        return proc.pid  # no teardown: a test that never reached its stop

    @pytest.mark.timeout(2, func_only=True)
    def test_hangs(app_pid):
        Path(os.environ["INNER_PID_FILE"]).write_text(str(app_pid))
        threading.Event().wait(600)
""")


def _gone(owner: Owner, timeout_s: float = 30) -> bool:
    """Whether the process `owner` has ended (a zombie counts as ended) within `timeout_s`."""
    try:
        psutil.Process(owner.pid).wait(timeout_s)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return not owner.alive()
    return True


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_a_timed_out_test_leaves_no_app_running(tmp_path: Path, method: str) -> None:
    (tmp_path / "test_inner.py").write_text(INNER, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    home, pid_file = fresh_home("wr"), tmp_path / "pid"
    env = {**os.environ, "INNER_HOME": str(home), "INNER_PID_FILE": str(pid_file),
           "INNER_CLI": "\x1f".join(wardian_cmd()), "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                          f"--timeout-method={method}", str(tmp_path / "test_inner.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert run.returncode != 0, run.stdout
    assert "Timeout" in run.stdout + run.stderr, run.stdout + run.stderr
    pid = int(pid_file.read_text())
    record_path = app_records.records_dir() / f"app-{pid}.json"
    if method == "thread":
        # os._exit ran neither finalizers nor atexit: the record is still there, and the next sweep ends the app.
        assert record_path.exists()
        record = app_records._read(record_path)  # pyright: ignore[reportPrivateUsage]
        assert record is not None
        app, _owner = record
        assert pid in app_records.reap_orphan_apps()
        assert _gone(app)
    else:
        # Ended at the inner pytest's exit, not by anything done here; still running, it would time out the wait.
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).wait(30)
    assert not record_path.exists()
    shutil.rmtree(home, ignore_errors=True)
