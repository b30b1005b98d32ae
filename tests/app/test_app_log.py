"""The app's log is bounded: `logs/app.log` rotates at `APP_LOG_MAX_BYTES` and keeps `APP_LOG_BACKUPS` older files
(docs/guide/using.md#the-home). Before, it grew without bound, and a chatty app (every refused connection logs a line)
could fill the disk."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from wardian.app.run import APP_LOG_BACKUPS, APP_LOG_MAX_BYTES, configure_logging
from wardian.home import Home
from wardian.home_setup import prepare_home

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


@pytest.fixture
def app_log(tmp_path: Path) -> Iterator[Home]:
    """The app's own logging set up on a fresh home, and taken down again (it configures the `wardian` logger)."""
    home = Home(tmp_path / "home")
    prepare_home(home)
    logger = logging.getLogger("wardian")
    before = list(logger.handlers)
    configure_logging(home, None)
    try:
        yield home
    finally:
        for handler in logger.handlers[len(before):]:
            handler.close()
            logger.removeHandler(handler)


def test_the_app_log_rotates_at_its_bound_and_keeps_a_bounded_number_of_files(app_log: Home) -> None:
    log = logging.getLogger("wardian.app")
    line = "x" * 1000
    for i in range((APP_LOG_BACKUPS + 2) * APP_LOG_MAX_BYTES // 1000):
        log.info("%d %s", i, line)
    names = sorted(p.name for p in app_log.log_dir.iterdir())
    assert names == ["app.log", *(f"app.log.{n}" for n in range(1, APP_LOG_BACKUPS + 1))]
    sizes = [p.stat().st_size for p in app_log.log_dir.iterdir()]
    assert max(sizes) <= APP_LOG_MAX_BYTES
    assert sum(sizes) <= (APP_LOG_BACKUPS + 1) * APP_LOG_MAX_BYTES
    last = (app_log.log_dir / "app.log").read_text(encoding="utf-8").splitlines()[-1]
    assert last.endswith(line)  # the newest lines are in app.log


def test_the_terminal_of_app_run_gets_each_line_the_log_file_gets_across_a_rotation(tmp_path: Path) -> None:
    """One handler writes both (`wardian.app.logfile`): each line formatted once, the same text in both places."""
    home = Home(tmp_path / "home")
    prepare_home(home)
    logger = logging.getLogger("wardian")
    before = list(logger.handlers)
    terminal = io.StringIO()
    configure_logging(home, terminal)
    try:
        log = logging.getLogger("wardian.app")
        line = "é" * 500  # two bytes each in the file: the bound is in bytes
        for i in range(APP_LOG_MAX_BYTES // 1000 + 10):
            log.warning("%d %s", i, line)
    finally:
        for handler in logger.handlers[len(before):]:
            handler.close()
            logger.removeHandler(handler)
    rotated = (home.log_dir / "app.log.1").read_text(encoding="utf-8").splitlines()
    current = (home.log_dir / "app.log").read_text(encoding="utf-8").splitlines()
    assert terminal.getvalue().splitlines() == rotated + current
    assert current
    assert (home.log_dir / "app.log.1").stat().st_size <= APP_LOG_MAX_BYTES
    assert all(" WARNING wardian.app: " in text for text in rotated + current)
