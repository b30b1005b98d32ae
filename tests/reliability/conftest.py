"""The reliability suites (docs/reliability.md): CI sizes by default, [NIGHTLY] sizes from
`scripts/reliability.py` (WARDIAN_RELIABILITY_NIGHTLY=1), which also runs the tests marked `slow`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import short_home
from tests.reliability.world import NIGHTLY


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if NIGHTLY:
        return
    skip = pytest.mark.skip(reason="nightly size: run scripts/reliability.py")
    for item in items:
        if "slow" in item.keywords and item.path.is_relative_to(Path(__file__).parent):
            item.add_marker(skip)


@pytest.fixture
def root() -> Iterator[Path]:
    path = short_home("wr")
    yield path
    shutil.rmtree(path, ignore_errors=True)
