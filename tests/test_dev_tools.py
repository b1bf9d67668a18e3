"""CI's dev tools are pinned, and the pins stay inside pyproject's ranges.

The README's test command (`pip install -e '.[dev]'`) resolves each dev tool within the range
in pyproject.toml; .ci/run installs the same extras with `-c .ci/constraints-dev.txt`, so CI
gets one version of each every day. These checks keep the two in step: a dev tool added to
pyproject without a pin, or a pin outside its range (which pip would refuse), fails here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / ".ci" / "constraints-dev.txt"


def pins(text: str) -> dict[str, str]:
    """Name -> version for each `name==version` line; comments and blank lines skipped."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, separator, version = line.partition("==")
        assert separator and version, f"not an exact pin: {line!r}"
        found[canonicalize_name(name)] = version
    return found


def dev_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(text) for text in project["optional-dependencies"]["dev"]]


def unpinned(requirements: list[Requirement], pinned: dict[str, str]) -> list[str]:
    """Each dev tool without a pin, or with one its range in pyproject does not allow."""
    problems = []
    for requirement in requirements:
        version = pinned.get(canonicalize_name(requirement.name))
        if version is None:
            problems.append(f"{requirement.name}: no pin")
        elif not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{requirement.name}: pin {version} outside {requirement.specifier}")
    return problems


def test_every_dev_tool_has_a_pin_inside_its_range() -> None:
    requirements = dev_requirements()
    assert len(requirements) >= 8, "the dev extras were not read"
    assert unpinned(requirements, pins(CONSTRAINTS.read_text(encoding="utf-8"))) == []


def test_a_missing_or_out_of_range_pin_is_caught() -> None:
    requirements = [Requirement("ruff>=0.6"), Requirement("mypy>=1.11,<2")]
    assert unpinned(requirements, {"mypy": "2.0.0"}) == [
        "ruff: no pin",
        "mypy: pin 2.0.0 outside <2,>=1.11",
    ]


def test_ci_installs_the_dev_extras_with_the_pins() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -c .ci/constraints-dev.txt -e '.[dev]'" in ci
