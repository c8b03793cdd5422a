"""The README names every placement method and partitioner a user can ask for, and no other:
the lists are read from its "Placement names" and "Partitioner names" paragraphs and compared
with the registries ``--placement`` and ``--partitioner`` check against (the README once left
out ``hash`` placement, which ``demo`` runs, and named no partitioner's flag value at all)."""

from __future__ import annotations

import re

from controller.placements import PLACEMENTS
from partitioners.registry import NAMES, VARIANTS
from tests.conftest import ROOT


def _paragraph(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n{title} ")
    return text[start : text.index("\n\n", start)]


def _names_before(para: str, stop: str) -> list[str]:
    """The backquoted names of the paragraph up to ``stop`` (its list's end)."""
    head = para[: para.index(stop)]
    return [n for n in re.findall(r"`([a-z][a-z-]*)`", head)]


def test_the_readme_names_every_placement_method() -> None:
    para = _paragraph("Placement names:")
    assert _names_before(para, ". `hash` puts") == list(PLACEMENTS)


def test_the_readme_names_every_partitioner_and_what_partition_also_takes() -> None:
    para = _paragraph("Partitioner names")
    flags = {"--partitioner", "--partitioners"}
    listed = [n for n in _names_before(para, "`trimtab partition` also") if n not in flags]
    assert listed == list(NAMES)
    extra = re.findall(r"`([a-z-]+)`\s+\(", para[para.index("`trimtab partition` also") :])
    assert extra == list(VARIANTS)
