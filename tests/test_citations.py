"""Citations a newcomer can open (docs/decisions.md D-020): no tracker numbers in the code, tests, benchmarks or
documents; every decision id cited (`D-012`) is an entry of docs/decisions.md; every `[KEY] §N` cited is a
section docs/references.md lists for that key; every document of docs/ cited exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("engine", "hp_lsp", "tests", "benchmarks", "docs", "scripts", "editors")
SKIPPED = ("node_modules", "out", "dist", ".vscode-test", "__pycache__", "corpus")
SUFFIXES = {".py", ".md", ".ts", ".js", ".lua", ".el", ".vim", ".sh", ".toml", ".json", ".yaml", ".yml"}

TRACKER = re.compile(r"\bissue [0-9]+\b", re.IGNORECASE)
DECISION = re.compile(r"\bD-[0-9]{3}\b")
SECTION = r"§ ?[0-9]+(?:\.[0-9]+)*"
# A key and its sections may be split over lines, or over the pieces of a concatenated string.
CITED = re.compile(rf"\[([A-Z][A-Z0-9-]*)\][\s\"#]*({SECTION}(?:(?:, ?| and | or | ?/ ?|-|–){SECTION})*)")
# A document of docs/; `owner/repo docs/x.md` names another repository's file (a run's published source), not ours.
DOCUMENT = re.compile(r"(?:\b([\w.-]+/[\w.-]+) )?\bdocs/([\w-]+\.md)\b")


def _files() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for top in SCANNED:
        found += [p for p in sorted((ROOT / top).rglob("*")) if p.suffix in SUFFIXES and p.is_file()
                  and not any(part in SKIPPED for part in p.relative_to(ROOT).parts)]
    return found


def _hits(pattern: re.Pattern[str]) -> list[tuple[str, re.Match[str]]]:
    return [(f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}", m)
            for p in _files() for text in [p.read_text(encoding="utf-8", errors="replace")]
            for m in pattern.finditer(text)]


def _numbers(section: str) -> tuple[int, ...]:
    return tuple(int(x) for x in section.strip("§ ").split("."))


def listed_sections() -> dict[str, list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """Per key of docs/references.md, the sections its table lists, each as a (first, last) range."""
    listed: dict[str, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}
    key = None
    for line in (ROOT / "docs" / "references.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading = re.search(r"\[([A-Z][A-Z0-9-]*)\]\s*$", line)
            key = heading.group(1) if heading else None
        elif key and (row := re.match(r"\|\s*([0-9][0-9.,–\- ]*)\|", line)):
            for part in row.group(1).split(","):
                first, _, last = part.strip().replace("–", "-").partition("-")
                listed.setdefault(key, []).append((_numbers(first), _numbers(last or first)))
    return listed


def resolves(key: str, section: str, listed: dict[str, list[tuple[tuple[int, ...], tuple[int, ...]]]]) -> bool:
    n = _numbers(section)
    return any(len(a) == len(n) and a <= n <= b for a, b in listed.get(key, []))


def test_no_tracker_numbers() -> None:
    assert [where for where, _ in _hits(TRACKER)] == []


def test_every_decision_cited_is_an_entry() -> None:
    entries = re.findall(r"^\*\*(D-[0-9]{3}) ", (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8"),
                         re.MULTILINE)
    assert len(entries) == len(set(entries)) and entries == sorted(entries)
    assert [f"{where} {m.group(0)}" for where, m in _hits(DECISION) if m.group(0) not in entries] == []


def test_every_cited_section_is_listed() -> None:
    listed = listed_sections()
    missing = [f"{where} [{m.group(1)}] {s}" for where, m in _hits(CITED)
               for s in re.findall(SECTION, m.group(2)) if not resolves(m.group(1), s, listed)]
    assert missing == []


def test_the_section_parser_reads_ranges() -> None:
    listed = {"K": [((4, 2), (4, 6)), ((10,), (10,))]}
    assert resolves("K", "§4.3", listed) and resolves("K", "§10", listed)
    assert not resolves("K", "§4.7", listed) and not resolves("K", "§10.1", listed)
    assert not resolves("X", "§1", listed)


def test_every_cited_document_exists() -> None:
    assert [f"{where} {m.group(0)}" for where, m in _hits(DOCUMENT)
            if m.group(1) is None and not (ROOT / "docs" / m.group(2)).is_file()] == []
