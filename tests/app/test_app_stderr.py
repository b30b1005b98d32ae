"""The app under test may log as much as it likes: its stderr is read as it is written (tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.conftest import AppHandle, AppProcess, stop_app
from wardian import errors

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

# A refused call logs one line of ~90 bytes: this many write several times a pipe's 64 KiB.
REFUSED_CALLS = 2_000


def test_a_chatty_app_never_blocks_on_its_stderr(app: AppHandle) -> None:
    """Regression (decision 0012): `start_app` piped the app's stderr into a pipe nobody read; an app that logged more
    than the pipe holds (10,000 refused sessions log a line each) blocked in its logging, and the calls after it timed
    out."""
    for n in range(REFUSED_CALLS):
        with pytest.raises(errors.SessionHomeMismatch):
            app.client.call("agent/list", {"session": f"wsn1_zzzz_{n}_forged"})
    assert app.call("app/status") is not None
    assert isinstance(app.proc, AppProcess)
    stop_app(app.proc)
    assert app.proc.stderr_output().count(b"session_home_mismatch") >= REFUSED_CALLS
    assert app.proc.stderr is not None
    assert app.proc.stderr.closed
