from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("MPLBACKEND", "Agg")

settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local[2] SparkSession for the whole test run (tests never stop it)."""
    from spark_adapter.session import make_session

    session = make_session("local[2]", "trimtab-tests", {"spark.ui.enabled": "true"})
    yield session
    session.stop()
