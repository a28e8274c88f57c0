"""Fixtures for calibration tests: small stated search configs (tests/support/configs.py) in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.configs import stated_config


@pytest.fixture()
def runs_dir(tmp_path: Path) -> Path:
    stated_config(tmp_path, "a.yaml")
    stated_config(tmp_path, "b.yaml", tp=2, gbs=32)
    stated_config(tmp_path, "c.yaml", nodes=2, gbs=64)
    return tmp_path
