"""Write .ci/constraints-dev.txt: the dev tools at the versions installed now, and theirs.

CI installs with `pip install -c .ci/constraints-dev.txt -e '.[dev]'`, so each day's run gets
the same ruff, mypy, pytest, hypothesis and playwright; the README's command (no `-c`) resolves
within pyproject's ranges. To move a tool forward: upgrade it in a venv made by the README's
command, run the suite, ruff and mypy, then `.venv/bin/python .ci/pin_dev_tools.py` and commit
the new file. tests/test_dev_tools.py checks that every dev tool has a pin inside its range.

Pinned: what the dev extras need and the runtime dependencies do not (those are the product's,
bounded by pyproject's ranges and tested as users would get them).
"""

from __future__ import annotations

import importlib.metadata as metadata
import tomllib
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / ".ci" / "constraints-dev.txt"


def installed_closure(requirements: Iterable[str]) -> dict[str, str]:
    """Name -> installed version for these requirements and everything they pull in."""
    found: dict[str, str] = {}
    todo = [Requirement(text) for text in requirements]
    while todo:
        requirement = todo.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        distribution = metadata.distribution(requirement.name)
        found[name] = distribution.version
        todo.extend(Requirement(text) for text in distribution.requires or [])
    return found


def main() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = installed_closure(project["dependencies"])
    dev = installed_closure(project["optional-dependencies"]["dev"])
    lines = [f"{name}=={version}" for name, version in sorted(dev.items()) if name not in runtime]
    header = "# Written by .ci/pin_dev_tools.py from the installed dev tools; see its docstring.\n"
    OUT.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(lines)} pins")


if __name__ == "__main__":
    main()
