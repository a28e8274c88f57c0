"""Fixtures for the search tests; the configs they are built from are in tests/engine/search/shapes.py."""

from __future__ import annotations

import pytest

from engine.config.types import Config
from tests.engine.search.shapes import make


@pytest.fixture
def tiny() -> Config:
    return make()
