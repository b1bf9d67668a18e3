"""`clawgate doctor`: check what a first start needs, each failure with its fix."""

import tempfile
from pathlib import Path

import typer

from gateway.config.settings import ConfigError, config_path, load_settings

Check = tuple[bool, str, str]  # (passed, what was checked, how to fix it)


def register(app: typer.Typer) -> None:
    app.command("doctor", help="check the configuration, the provider, sqlite-vec and the "
                               "workspaces directory")(doctor_command)


def doctor_command() -> None:
    checks: list[Check] = []
    try:
        config = load_settings()
        checks.append((True, f"configuration ({config_path()} + environment) is valid", ""))
    except ConfigError as exc:
        checks.append((False, "configuration is invalid", str(exc)))
        raise typer.Exit(_report(checks)) from None
    try:
        config.api_key()
        checks.append((True, f"API key for {config.llm.provider} is set", ""))
    except ConfigError as exc:
        checks.append((False, "no provider API key", str(exc)))
    try:
        from memory.sqlite import vec_version

        checks.append((True, f"sqlite-vec {vec_version()} loads", ""))
    except Exception as exc:
        checks.append((False, "sqlite-vec does not load",
                       f"{exc}. Reinstall with: pip install sqlite-vec pysqlite3-binary"))
    checks.append(_check_writable(config.workspaces_dir))
    raise typer.Exit(_report(checks))


def _check_writable(root: Path) -> Check:
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
            pass
    except OSError as exc:
        return (False, f"workspaces root {root} is not writable",
                f"{exc.strerror}. Set CLAWGATE_WORKSPACES_DIR to a writable directory.")
    return (True, f"workspaces root {root.resolve()} is writable", "")


def _report(checks: list[Check]) -> int:
    for ok, what, fix in checks:
        print(f"{'ok ' if ok else 'FAIL'} {what}")
        if fix:
            print(f"     fix: {fix}")
    failed = sum(not ok for ok, _, _ in checks)
    print("all checks passed" if not failed else f"{failed} check(s) failed")
    return 0 if not failed else 1
