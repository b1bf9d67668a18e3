"""`clawgate skills list|check` and `clawgate mcp check`: what a person added, and whether it works.

The facts come from gateway/capabilities/reports.py; this module only reads options and prints.
"""

from __future__ import annotations

import asyncio

import typer

from gateway.cli.common import (
    EXIT_FAILED,
    exit_with,
    print_json,
    print_table,
    resolve_workspace,
    settings,
)
from gateway.cli.options import JsonOption, WorkspaceOption

skills_app = typer.Typer(
    help="skills (skills/<name>/SKILL.md): list them, check them", no_args_is_help=True
)
mcp_app = typer.Typer(
    help="MCP tool servers from clawgate.toml: start each once and report", no_args_is_help=True
)


def register(root: typer.Typer) -> None:
    root.add_typer(skills_app, name="skills")
    root.add_typer(mcp_app, name="mcp")


def _report(workspace: str | None):  # type: ignore[no-untyped-def]
    from gateway.capabilities.reports import skill_report

    config = settings()
    path = resolve_workspace(workspace, config, must_exist=workspace is not None)
    return skill_report(config, path if path.is_dir() else None)


@skills_app.command(
    "list",
    help="the skills a private chat of this workspace is offered "
    "(its own and the shared directory's)",
)
def list_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    report = _report(workspace)
    if as_json:
        print_json(
            {"skills": report.rows(), "problems": report.problems(), "prompt": report.cost()}
        )
        return
    if not report.rows():
        print(f"no skills (add skills/<name>/SKILL.md to {report.workspace or 'the workspace'})")
    else:
        print_table(
            ["name", "source", "description"],
            [(r["name"], r["source"], _one_line(r["description"])) for r in report.rows()],
        )
    if report.problems():
        print(f"{len(report.problems())} broken skill(s) skipped: see `clawgate skills check`")


@skills_app.command(
    "check",
    help="validate every SKILL.md (front matter, name, description "
    "length) and show the prompt cost; exit 1 if one is broken",
)
def check_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    report = _report(workspace)
    cost = report.cost()
    if as_json:
        print_json(
            {
                "ok": not report.problems(),
                "problems": report.problems(),
                "notes": report.notes(),
                "prompt": cost,
                "skills": len(report.rows()),
            }
        )
    else:
        for problem in report.problems():
            print(f"BROKEN {problem['path']}: {problem['problem']}")
        for note in report.notes():
            print(f"note   {note}")
        print(
            f"{len(report.rows())} valid skill(s); prompt section {cost['chars']:,} chars "
            f"(~{cost['tokens']:,} tokens): {cost['listed']} listed, {cost['names_only']} by "
            f"name only, {cost['omitted']} not shown"
        )
    exit_with(EXIT_FAILED if report.problems() else 0)


@mcp_app.command(
    "check",
    help="start every configured server, list its tools and schema size, "
    "stop it; exit 1 if one does not start",
)
def mcp_check_command(as_json: JsonOption = False) -> None:
    from gateway.capabilities.reports import mcp_report

    rows = asyncio.run(mcp_report(settings()))
    if as_json:
        print_json(rows)
    elif not rows:
        print("no MCP servers configured ([mcp.servers.<name>] in clawgate.toml)")
    else:
        print_table(
            ["server", "status", "contexts", "tools", "schema chars", "detail"],
            [
                (
                    r["server"],
                    r["status"],
                    ",".join(r["contexts"]),
                    ", ".join(r["tools"]) or "-",
                    f"{r['schema_chars']:,}",
                    r["detail"],
                )
                for r in rows
            ],
        )
    exit_with(EXIT_FAILED if any(r["status"] != "ready" for r in rows) else 0)


def _one_line(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
