"""`__init__` only re-exports (its re-exports are the package's interface), and `__all__` lists exactly what each module
offers."""

from __future__ import annotations

import types

import pytest

import wardian_harness
from wardian_harness.models import scripted_model
from wardian_harness.providers import codex_home, codex_install

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


@pytest.mark.parametrize("module", [codex_home, codex_install, scripted_model], ids=lambda m: m.__name__)
def test_every_name_in_all_exists(module: types.ModuleType) -> None:
    assert all(hasattr(module, name) for name in module.__all__)


def test_the_package_re_exports_only_names_its_modules_offer() -> None:
    offered = set(codex_home.__all__) | set(codex_install.__all__) | set(scripted_model.__all__)
    assert set(wardian_harness.__all__) <= offered
    assert all(getattr(wardian_harness, name) is not None for name in wardian_harness.__all__)
