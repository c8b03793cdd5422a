"""Writes the shipped scenario files. Run: python scenarios/make_scenarios.py [--out DIR]

The scenarios are generated so that their structure is explicit here, a module per family in
``generators/``; the YAML files are committed and are what users read and replay. The suite
checks that this script writes every shipped file as committed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from generators import dpc, drift, elastic, overload, placement, seeds, skew, spark

FAMILIES = (seeds, placement, skew, overload, drift, elastic, dpc, spark)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent, help="where to write")
    out = ap.parse_args().out
    if not out.is_dir():
        ap.error(f"--out: {out} is not a directory")
    for family in FAMILIES:
        family.write_all(out)


if __name__ == "__main__":
    main()
