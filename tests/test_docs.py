"""The README and docs/ stay true: the install lines CI runs, every setting, no dead link.

The README is the short entry (at most about 400 lines); everything else lives in a page under
docs/ that the README links. These checks fail when a setting is added without its row in
docs/configuration.md, when a page or a heading a link points at is renamed, or when the README
grows back into a manual.
"""

from __future__ import annotations

import re
from pathlib import Path

from gateway.config.settings import Settings
from tests.test_example_config import fields

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
RUN_LINE = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/clawgate run"
TEST_LINE = "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/pytest"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_starts_with_the_two_setup_commands_ci_runs():
    text = README.read_text(encoding="utf-8")
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    assert RUN_LINE in first_block.splitlines()
    assert TEST_LINE in first_block.splitlines()
    # CI runs it in two halves: the install with the dev tools pinned, then the suite offline.
    install, tests = TEST_LINE.split(" && .venv/bin/pytest")[0], ".venv/bin/pytest"
    pinned = install.replace("pip install", "pip install -c .ci/constraints-dev.txt")
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert pinned in ci_lines
    assert any(line.startswith(f".ci/offline {tests}") for line in ci_lines)


def test_the_readme_stays_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 420, f"README.md has {lines} lines: move the detail to a page under docs/"


def _documented_pairs(reference: str) -> set[tuple[str, str]]:
    """(section, key) for each table row: a row names its section and one or more keys."""
    pairs: set[tuple[str, str]] = set()
    for row in reference.splitlines():
        if not row.startswith("| ") or row.startswith("| environment variable"):
            continue
        cells = row.strip("|").split("|")
        sections = {m.lower() for m in re.findall(r"CLAWGATE_([A-Z]+)__", cells[0])}
        sections |= set(re.findall(r"\[([a-z_]+)[.\]]", cells[1]))
        keys = {m.lower() for m in re.findall(r"__([A-Z_]+?)(?:__|`|,|$)", cells[0])}
        keys |= set(re.findall(r"`(?:\[[^\]]+\] )?([a-z_]+)`", cells[0] + cells[1]))
        keys |= set(re.findall(r"\[[a-z_]+\.([a-z_]+)", cells[1]))  # [llm.workspaces.<person>]
        keys |= set(re.findall(r"\] ([a-z_]+)", cells[1]))
        for section in sections or {""}:
            pairs |= {(section, key) for key in keys}
        # a nested section, `[media.transcription] backend`, is its own (section, key)
        pairs |= set(re.findall(r"\[([a-z_]+(?:\.[a-z_]+)+)\] ([a-z_]+)", cells[1]))
        # a top-level table of tables: `[prices.<model>]`
        pairs |= {("", name) for name in re.findall(r"\[([a-z_]+)\.<", cells[1])}
    return pairs


def test_every_setting_has_a_row_in_docs_configuration():
    documented = _documented_pairs((DOCS / "configuration.md").read_text(encoding="utf-8"))
    missing = []
    for path in fields(Settings):
        section, _, key = path.rpartition(".")
        if (section, key) not in documented:
            missing.append(path)
    assert not missing, f"docs/configuration.md has no row for {sorted(missing)}"


def _anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            title = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower())
            anchors.add(title.replace(" ", "-"))
    return anchors


def test_every_link_between_the_readme_and_docs_leads_somewhere():
    pages = [README, *sorted(DOCS.glob("*.md"))]
    dead = []
    for page in pages:
        in_code = False
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue  # https:, mailto: ...
                path_part, _, anchor = target.partition("#")
                dest = (page.parent / path_part).resolve() if path_part else page
                where = f"{page.relative_to(ROOT)}:{number} -> {target}"
                if not dest.exists():
                    dead.append(where)
                elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                    dead.append(where + " (no such heading)")
    assert not dead, "dead links:\n" + "\n".join(dead)


def test_the_readme_links_every_page_in_docs():
    text = README.read_text(encoding="utf-8")
    unlinked = [p.name for p in DOCS.glob("*.md") if f"(docs/{p.name}" not in text]
    assert not unlinked, f"README.md does not link {unlinked}"
