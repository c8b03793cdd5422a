"""Doctests everywhere can use ``np``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _doctest_numpy(doctest_namespace: dict[str, Any]) -> None:
    doctest_namespace["np"] = np
