"""Every reference from the code to a section of docs/ names a heading that is there.

Docstrings and comments point to the measurement or the rule behind a
constant (``docs/performance.md, "Probing only where a proof is asked
for"``); a section renamed or never written leaves the reader nowhere. A
reference may give the start of a heading only (its date left out).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a document, then a quoted section name, with "section" or "sections" between them or not
REFERENCE = re.compile(r'docs/([a-z][a-z-]*\.md),? (?:sections? )?"([^"]+)"')


def flat(text: str) -> str:
    """``text`` on one line: a reference may run over a line break, inside a comment ("#", "#:") or a docstring."""
    return re.sub(r"\s*\n\s*(?:#:?\s*)?", " ", text)


def references() -> list[tuple[str, str, str]]:
    """(file, document, section) of every reference in the package, the benchmarks and the tests."""
    out = []
    for path in sorted([*ROOT.glob("optimizer/**/*.py"), *ROOT.glob("bench/**/*.py"), *ROOT.glob("tests/*.py")]):
        name = str(path.relative_to(ROOT))
        out += [(name, m.group(1), m.group(2)) for m in REFERENCE.finditer(flat(path.read_text()))]
    return out


def headings() -> dict[str, list[str]]:
    return {p.name: [line.lstrip("#").strip() for line in p.read_text().splitlines() if line.startswith("#")]
            for p in (ROOT / "docs").glob("*.md")}


def test_every_section_the_code_names_is_a_heading_of_its_document():
    found = references()
    assert len(found) > 20  # the pattern still reads the references (there are dozens)
    heads = headings()
    missing = [(f, doc, section) for f, doc, section in found
               if not any(h.startswith(section) for h in heads.get(doc, []))]
    assert missing == []


def test_a_section_that_is_not_there_is_found():
    # the check itself, on a made-up reference: it must not pass whatever the documents say
    heads = headings()
    assert not any(h.startswith("A section nobody wrote") for h in heads["performance.md"])
    text = 'see (docs/performance.md,\n    # "A section nobody wrote")'
    assert [m.groups() for m in REFERENCE.finditer(flat(text))] == [("performance.md", "A section nobody wrote")]
