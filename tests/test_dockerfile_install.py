"""The Dockerfile's install steps, replayed in a fresh virtual environment.

CI has no container engine (`.ci/run` builds the image only where a Docker daemon answers),
so this replays what the image build does after `WORKDIR /app`: each `COPY` into an empty
build directory and each `RUN` in it, with `python`/`pip` being a fresh venv's. It runs
offline: the venv sees the test environment's installed packages (a .pth line) and pip runs
with `--no-index`, so a dependency step that the already installed packages do not satisfy
fails instead of downloading. What it catches: a package directory the Dockerfile does not
copy, package data (the workspace templates) missing from the installed copy, a dependency
step that breaks, and an installed `clawgate` that cannot start.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"


def install_steps(text: str) -> list[tuple[str, str]]:
    """(instruction, arguments) from `WORKDIR /app` up to `USER`, continuations joined."""
    joined = re.sub(r"\\\n", " ", text)
    steps: list[tuple[str, str]] = []
    started = False
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "WORKDIR":
            started = True
            continue
        if instruction == "USER":
            break
        if started and instruction in ("COPY", "RUN"):
            steps.append((instruction, args.strip()))
    return steps


def _copy(sources: list[str], target: str, build: Path) -> None:
    """Docker's COPY: a directory's contents go into the target directory; a file goes into
    a target ending in / (or ".") or becomes the target."""
    destination = build / target
    into_directory = target.endswith("/") or target in (".", "./") or len(sources) > 1
    for source in sources:
        origin = REPO / source
        if origin.is_dir():
            shutil.copytree(
                origin,
                destination,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        elif into_directory:
            destination.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, destination / origin.name)
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, destination)


def test_dockerfile_steps_parse_into_copies_and_runs():
    steps = install_steps(DOCKERFILE.read_text(encoding="utf-8"))
    copied = {shlex.split(args)[0] for kind, args in steps if kind == "COPY"}
    packages = {"gateway", "channels", "memory", "heartbeat"}  # pyproject's packages.find
    assert packages <= copied, f"the image would miss {packages - copied}"
    assert any(kind == "RUN" and "pip install" in args for kind, args in steps)


def test_the_image_install_steps_work_in_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Offline: the packages of this test environment (pip, setuptools and wheel for the
    # build, the dependencies) are visible to the venv, which installs into itself.
    (site / "test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = venv / "bin" / "pip"
    pip.write_text(f'#!/bin/sh\nexec "{python}" -m pip "$@"\n')
    pip.chmod(0o755)

    build = tmp_path / "app"
    build.mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        {
            "PATH": f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}",
            "PIP_NO_INDEX": "1",
            "PIP_NO_BUILD_ISOLATION": "0",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    for kind, args in install_steps(DOCKERFILE.read_text(encoding="utf-8")):
        if kind == "COPY":
            *sources, target = shlex.split(args)
            _copy(sources, target, build)
        else:
            command = args.replace("/tmp/", f"{scratch}/")
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=build,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, f"RUN {args}\n{done.stdout}\n{done.stderr}"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = (
        "import gateway, pathlib; from importlib import resources; "
        "print(gateway.__file__); "
        "print(len(list(resources.files('gateway.workspace').joinpath('templates').iterdir())));"
        "from gateway.panel.render import render; "
        "print(len(render('login.html', title='Log in', person='', tab='', csrf='', flash=(), "
        "logged_in=False, pre='p', error='')))"
    )
    done = subprocess.run(
        [str(python), "-c", probe],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    location, templates, login_page = done.stdout.split()
    assert Path(location).is_relative_to(venv)  # the installed copy, not this checkout
    assert int(templates) > 0
    assert int(login_page) > 500  # the panel's templates ship in the package

    # The image's command starts and says in one line what is missing (no key, no channel).
    clean = {
        k: v
        for k, v in env.items()
        if not k.startswith("CLAWGATE_") and k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
    }
    clean["CLAWGATE_WORKSPACES_DIR"] = str(tmp_path / "data")
    done = subprocess.run(
        [str(venv / "bin" / "clawgate"), "run"],
        cwd=elsewhere,
        env=clean,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "ANTHROPIC_API_KEY" in done.stderr and "Traceback" not in done.stderr
