"""The `clawgate` entry point: the root options and the one error policy.

The command tree (Typer + Rich, gateway/cli/app.py) is built for every command line except a
plain `clawgate run` (or a bare `clawgate`, which is the same), the command every deploy,
update and restart runs: that one goes straight to gateway/cli/start.py, so the gateway polls
its channels without first importing the command line's framework. The one exit-code rule
(docs/cli.md, gateway/cli/common.py): 2 when the command cannot do what was asked as written
(change the command line or a setting), 1 when it ran and failed or found a problem, 130 when
interrupted; each error is one `clawgate: ...` line, with the traceback only under `--debug`.
"""

from __future__ import annotations

import contextlib
import errno
import sys
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path

from gateway.cli.common import EXIT_FAILED, EXIT_USAGE, CliError
from gateway.config.settings import ConfigError
from gateway.stores.state import StateError

# A path that names nothing usable is a mistake in the command (2); a disk that is full or
# failing is a failure (1).
PATH_MISTAKES = frozenset(
    {
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EEXIST,
        errno.EACCES,
        errno.EPERM,
        errno.ENAMETOOLONG,
        errno.ELOOP,
    }
)

# Root options accepted anywhere on the command line (before or after the subcommand).
_ROOT_VALUE_OPTIONS = ("--config",)
_ROOT_FLAGS = ("--debug",)


def hoist_root_options(argv: Sequence[str]) -> tuple[list[str], bool]:
    """Move `--config X` / `--config=X` / `--debug` to the front, wherever they were typed."""
    front: list[str] = []
    rest: list[str] = []
    debug = False
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        if item == "--":
            rest.extend(items[i:])
            break
        if item in _ROOT_FLAGS:
            front.append(item)
            debug = True
        elif item in _ROOT_VALUE_OPTIONS and i + 1 < len(items):
            front.extend(items[i : i + 2])
            i += 1
        elif item.startswith(tuple(f"{o}=" for o in _ROOT_VALUE_OPTIONS)):
            front.append(item)
        else:
            rest.append(item)
        i += 1
    return front + rest, debug


def plain_run(args: Sequence[str]) -> tuple[Path | None] | None:
    """`(config file or None,)` when `args` (root options hoisted) is just `run` or nothing,
    else None: every other command line goes through the command tree."""
    rest = list(args)
    if rest and rest[-1] == "run":
        rest.pop()
    config: Path | None = None
    i = 0
    while i < len(rest):
        item = rest[i]
        if item in _ROOT_FLAGS:
            i += 1
        elif item in _ROOT_VALUE_OPTIONS and i + 1 < len(rest):
            config = Path(rest[i + 1])
            i += 2
        elif item.startswith(tuple(f"{o}=" for o in _ROOT_VALUE_OPTIONS)):
            config = Path(item.split("=", 1)[1])
            i += 1
        else:
            return None
    return (config,)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (the `clawgate` script's entry point).

    Everything it prints goes through streams that cannot raise or block (a closed or full
    pipe: gateway/ops/output.py), set up before anything else can print."""
    from gateway.ops.output import safe_output

    with safe_output():
        return _run_command(sys.argv[1:] if argv is None else argv)


def _run_command(argv: Sequence[str]) -> int:
    args, debug = hoist_root_options(argv)
    try:
        if (plain := plain_run(args)) is not None:
            from gateway.cli.start import prepare_run, run_gateway, use_config_file

            use_config_file(plain[0])
            prepare_run()
            with redacted_output():  # no configured secret is ever printed (ops/redaction.py)
                return run_gateway()
        from gateway.cli.app import run_typer

        with redacted_output():
            return run_typer(args)
    except KeyboardInterrupt:
        print("clawgate: interrupted", file=sys.stderr)
        return 130
    except CliError as exc:
        return _one_line(str(exc), exc.code, debug)
    except ConfigError as exc:
        return _one_line(str(exc), EXIT_USAGE, debug)
    except StateError as exc:  # the database is damaged: a failure, not a typo
        return _one_line(str(exc), EXIT_FAILED, debug)
    except Exception as exc:
        from gateway.workspace.seed import WorkspaceError

        if isinstance(exc, WorkspaceError):
            return _one_line(str(exc), EXIT_USAGE, debug)
        if isinstance(exc, OSError) and exc.filename is not None:
            reason = exc.strerror or type(exc).__name__
            code = EXIT_USAGE if exc.errno in PATH_MISTAKES else EXIT_FAILED
            return _one_line(f"{reason}: {exc.filename}", code, debug)
        if debug:
            traceback.print_exc()
        else:
            print(
                f"clawgate: unexpected error: {type(exc).__name__}: {exc} "
                "(run again with --debug for the traceback)",
                file=sys.stderr,
            )
        return 1


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """stdout and stderr mask every configured secret while a command runs."""
    from gateway.config.settings import load_settings
    from gateway.ops.redaction import RedactingStream, Redactor, settings_secrets

    try:
        redactor = Redactor.from_settings(load_settings())
    except ConfigError:  # the command reports it; still mask the standard key variables
        redactor = Redactor(settings_secrets(None))
    saved = sys.stdout, sys.stderr
    sys.stdout = RedactingStream(sys.stdout, redactor)
    sys.stderr = RedactingStream(sys.stderr, redactor)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _one_line(message: str, code: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"clawgate: {message}", file=sys.stderr)
    return code
