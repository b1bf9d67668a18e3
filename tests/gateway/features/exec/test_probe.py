"""Where the sandbox cannot run, it says why and what to do, and nothing runs at all: the
only way to run a command is an opened Sandbox, whose every program is bubblewrap."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from gateway.features.exec.probe import Availability
from gateway.features.exec.sandbox import Sandbox, SandboxUnavailable, command_argv, probe
from gateway.features.exec.settings import ExecSettings


def _fake_bwrap(tmp_path: Path, message: str) -> str:
    fake = tmp_path / "bwrap"
    fake.write_text(
        f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'bubblewrap 0.8.0' && exit 0\n"
        f"echo '{message}' >&2\nexit 1\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    return str(fake)


def test_a_missing_bubblewrap_says_how_to_install_it(tmp_path: Path) -> None:
    found = probe(bwrap=str(tmp_path / "nothing"))
    assert not found.ok and "not installed" in found.reason
    assert "apt-get install bubblewrap" in found.remedy
    with pytest.raises(SandboxUnavailable, match="not installed"):
        Sandbox.open(ExecSettings(), bwrap=str(tmp_path / "nothing"))


def test_a_bubblewrap_that_cannot_make_namespaces_is_reported_with_its_words(
    tmp_path: Path,
) -> None:
    fake = _fake_bwrap(tmp_path, "bwrap: Creating new namespace failed: Operation not permitted")
    found = probe(bwrap=fake)
    assert not found.ok and found.version == "0.8.0"
    assert "Creating new namespace failed: Operation not permitted" in found.reason
    assert found.remedy
    with pytest.raises(SandboxUnavailable) as raised:
        Sandbox.open(ExecSettings(), bwrap=fake)
    assert raised.value.availability == found
    assert raised.value.availability.line().startswith("sandbox unavailable: ")


def test_no_sandbox_object_exists_without_a_working_bubblewrap(tmp_path: Path) -> None:
    from gateway.agent.web.addresses import AddressPolicy, SystemResolver

    with pytest.raises(SandboxUnavailable):
        Sandbox(
            Availability(False, reason="no"),
            ExecSettings(),
            hidden_paths=(),
            runtime_dir=tmp_path,
            policy=AddressPolicy(),
            resolver=SystemResolver(),
        )


def test_every_run_is_bubblewrap_with_every_namespace_and_no_capability() -> None:
    for network in (False, True):
        argv = command_argv(
            "/usr/bin/bwrap",
            ExecSettings(),
            ["--chdir", "/workspace"],
            "rm -rf /",
            passed_fds=(5, 7),
            mark_fd=7,
            seccomp_fd=5,
            network=network,
            python="/usr/bin/python3",
        )
        assert argv[0] == "/usr/bin/bwrap"
        for flag in (
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-net",
            "--die-with-parent",
            "--new-session",
        ):
            assert flag in argv
        assert argv[argv.index("--cap-drop") + 1] == "ALL"
        assert argv[-5:-3] == ["/bin/bash", "-c"] and argv[-1] == "rm -rf /"
        assert "exec 5>&- 7>&-" in argv[-3] and "ulimit" in argv[-3]


def test_the_output_folder_must_be_a_plain_folder_of_the_owner() -> None:
    assert ExecSettings(output_dir="out/exec").output_dir == "out/exec"
    for bad in (
        "/tmp",
        "../x",
        ".hidden",
        "groups/x",
        "AGENTS.md",
        "sessions",
        "memory",
        "MEMORY.md",
        "",
    ):
        with pytest.raises(ValidationError):
            ExecSettings(output_dir=bad)


def test_groups_a_dead_gateway_left_behind_are_swept() -> None:
    from gateway.features.exec.cgroups import Cgroups

    found = Cgroups.detect()
    if found is None:
        pytest.skip("no cgroup can be made here (RLIMIT_NPROC bounds the processes instead)")
    stale = found.pids_parent.parent / "clawgate-exec-999999"  # above any pid_max default
    (stale / "run-1").mkdir(parents=True, exist_ok=True)
    again = Cgroups.detect()
    assert again is not None and not stale.exists()
    again.remove()
