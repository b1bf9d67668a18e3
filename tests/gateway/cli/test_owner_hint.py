"""`clawgate run` says how to make a platform account the owner's, until one is."""

from __future__ import annotations

from gateway.cli.serve import _owner_hint
from gateway.ops.state import StateDB


async def test_run_names_the_one_step_owner_path_until_an_account_is_linked(make_settings,
                                                                           capsys):
    settings = make_settings()
    _owner_hint(settings, ["telegram"])  # no state database yet
    assert "clawgate pairing approve telegram CODE --owner" in capsys.readouterr().err

    async with StateDB.for_root(settings.workspaces_dir) as state:
        await state.link("discord", "5", "someone-else")
    _owner_hint(settings, ["telegram", "discord"])
    assert "no Telegram or Discord account is yours yet" in capsys.readouterr().err

    async with StateDB.for_root(settings.workspaces_dir) as state:
        await state.link("telegram", "77", settings.owner)
    _owner_hint(settings, ["telegram"])
    assert capsys.readouterr().err == ""
