"""The pure packages never import Spark, the scheduler, the exporter, the simulator or the controller."""

from __future__ import annotations

import subprocess
import sys

PURE = ["core", "placement", "shedding", "partitioners", "ha"]
FORBIDDEN = [
    "pyspark",
    "apscheduler",
    "prometheus_client",
    "simulator",
    "controller",
    "spark_adapter",
]


def test_pure_packages_import_nothing_impure() -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        f"for p in {PURE!r}:\n"
        "    m = importlib.import_module(p)\n"
        "    for info in pkgutil.walk_packages(m.__path__, p + '.'):\n"
        "        importlib.import_module(info.name)\n"
        f"bad = [f for f in {FORBIDDEN!r} if f in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
