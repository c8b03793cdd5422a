"""The house's rules, checked: the import layers (import-linter, function-level imports too),
and modules and functions short enough to read."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = [
    "core",
    "placement",
    "partitioners",
    "shedding",
    "ha",
    "scaling",
    "controller",
    "simulator",
    "spark_adapter",
]
# outside the packages, the benches and the scenario generators: modules as short (their
# functions hold the tables' prose and the scenarios' data, so the function limit is the
# packages' alone)
SCRIPTS = ["bench", "scenarios"]
LINT = str(Path(sys.executable).parent / "lint-imports")
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_import_contracts_hold() -> None:
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "BROKEN" not in r.stdout and r.stdout.count("KEPT") >= 4


def test_a_wrong_import_breaks_the_contracts(tmp_path: Path) -> None:
    """A function-level import of the controller from core (the bottom layer) must fail."""
    for p in PACKAGES:
        shutil.copytree(ROOT / p, tmp_path / p, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert _lint(tmp_path).returncode == 0  # the copy itself is clean
    with open(tmp_path / "core" / "hashing.py", "a") as f:
        f.write("\n\ndef _wrong() -> None:\n    import controller.daemon  # noqa: F401\n")
    r = _lint(tmp_path)
    assert r.returncode != 0
    assert "core is not allowed to import controller" in r.stdout, r.stdout[-2000:]
    assert "core.hashing -> controller.daemon" in r.stdout


def _sources() -> list[Path]:
    return sorted(f for p in PACKAGES for f in (ROOT / p).rglob("*.py"))


def test_modules_and_functions_are_short() -> None:
    long_modules, long_functions = [], []
    scripts = sorted(f for p in SCRIPTS for f in (ROOT / p).rglob("*.py"))
    assert len(scripts) > 10, scripts  # the benches and generators were found
    for f in [*_sources(), *scripts]:
        text = f.read_text()
        rel = f.relative_to(ROOT)
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(f"{rel}: {len(text.splitlines())} lines")
        if f in scripts:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long_functions.append(f"{rel}:{node.lineno} {node.name}: {n} lines")
    assert not long_modules, long_modules
    assert not long_functions, long_functions


def test_pure_packages_import_nothing_impure_at_runtime() -> None:
    """Importing every pure module loads no Spark, scheduler, exporter or upper layer."""
    pure = ["core", "placement", "shedding", "partitioners", "ha"]
    forbidden = ["pyspark", "apscheduler", "prometheus_client", "simulator", "controller"]
    forbidden.append("spark_adapter")
    code = (
        "import importlib, pkgutil, sys\n"
        f"for p in {pure!r}:\n"
        "    m = importlib.import_module(p)\n"
        "    for info in pkgutil.walk_packages(m.__path__, p + '.'):\n"
        "        importlib.import_module(info.name)\n"
        f"bad = [f for f in {forbidden!r} if f in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
