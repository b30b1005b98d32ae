import pytest

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_app_fixture_serves_status(app):
    """The fixture's app answers app/status for its own home (test infrastructure check)."""
    status = app.call("app/status")
    assert status["running"] is True
    assert status["home"] == str(app.home.root)
    assert status["pid"] == app.pid
