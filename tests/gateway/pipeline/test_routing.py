"""Routing: which person, which workspace, which session, private or not, and the group area."""

from __future__ import annotations

from pathlib import Path

import pytest

from channels.base import InboundMessage
from gateway.pipeline.routing import Router, person_id_for
from gateway.workspace.seed import WorkspaceError
from memory.layout import (
    dm_session_key,
    group_area,
    group_session_key,
    heartbeat_session_key,
    is_dm_session_key,
)


class Links:
    """Identity links as the state database keeps them: (channel, user id) -> person id."""

    def __init__(self, links: dict[tuple[str, str], str]) -> None:
        self.links = links

    async def person_for(self, channel: str, sender_id: str) -> str | None:
        return self.links.get((channel, sender_id))


def _msg(
    sender: str,
    *,
    chat_type: str = "direct",
    chat_id: str = "",
    channel: str = "telegram",
    name: str = "",
) -> InboundMessage:
    return InboundMessage(
        channel,
        chat_id or sender,
        sender,
        "hi",
        chat_type=chat_type,  # type: ignore[arg-type]
        sender_name=name,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "workspaces"


async def test_dm_is_private_in_the_senders_own_workspace(root: Path) -> None:
    router = Router(root, owner="telegram-1")
    owner = await router.resolve(_msg("1", name="Ann"))
    assert (owner.person_id, owner.workspace, owner.session_key) == (
        "telegram-1",
        root / "telegram-1",
        "telegram-1:dm",
    )
    assert owner.private and owner.sender_is_owner and owner.access.private
    assert owner.access.area == "" and owner.sender_name == "Ann"

    other = await router.resolve(_msg("2"))
    assert (other.person_id, other.workspace, other.session_key) == (
        "telegram-2",
        root / "telegram-2",
        "telegram-2:dm",
    )
    assert other.private and not other.sender_is_owner  # private, in their own workspace


async def test_group_is_shared_in_the_owners_workspace_with_its_own_area(root: Path) -> None:
    router = Router(root, owner="telegram-1")
    route = await router.resolve(_msg("2", chat_type="group", chat_id="-100777", name="Bo"))
    assert route.person_id == "telegram-1" and route.workspace == root / "telegram-1"
    assert route.session_key == "telegram:group:-100777"
    assert not route.private and not route.access.private
    assert route.area == route.access.area == "groups/telegram--100777"
    assert (route.sender_id, route.sender_name, route.sender_is_owner) == ("2", "Bo", False)
    # The owner writing in the group stays in the group's shared context.
    owner = await router.resolve(_msg("1", chat_type="group", chat_id="-100777"))
    assert owner.sender_is_owner and not owner.private
    assert owner.session_key == route.session_key and owner.area == route.area


async def test_identity_links_join_accounts_and_decide_ownership(root: Path) -> None:
    router = Router(root, owner="ann", identities=Links({("discord", "55"): "ann"}))
    dm = await router.resolve(_msg("55", channel="discord"))
    assert (dm.person_id, dm.session_key, dm.private) == ("ann", "ann:dm", True)
    group = await router.resolve(_msg("55", channel="discord", chat_type="group", chat_id="9"))
    assert group.sender_is_owner and not group.private
    stranger = await router.resolve(_msg("56", channel="discord", chat_type="group", chat_id="9"))
    assert not stranger.sender_is_owner


async def test_the_terminal_is_the_owner(root: Path) -> None:
    router = Router(root, owner="ann", identities=Links({("terminal", "x"): "mallory"}))
    route = await router.resolve(_msg("x", channel="terminal"))
    assert route.person_id == "ann" and route.private and route.sender_is_owner


def test_person_ids_are_single_safe_path_components() -> None:
    assert person_id_for("telegram", "123", "ann") == "telegram-123"
    assert person_id_for("discord", "../../etc", "ann") == "discord-etc"
    assert person_id_for("discord", "...", "ann") == "discord-unknown"
    assert person_id_for("terminal", "whoever", "ann") == "ann"


async def test_a_hostile_sender_id_cannot_leave_the_workspaces_root(root: Path) -> None:
    router = Router(root, owner="ann")
    route = await router.resolve(_msg("../../../../tmp/x"))
    assert route.workspace.parent == root and "/" not in route.person_id
    with pytest.raises(WorkspaceError):
        await Router(root, owner="ann", identities=Links({("t", "1"): "../x"})).resolve(
            _msg("1", channel="t")
        )


def test_group_areas_are_one_component_and_distinct() -> None:
    areas = {group_area("telegram", chat) for chat in ("-1", "_1", "1", "a/b", "a_b", "..", "")}
    assert len(areas) == 7
    for area in areas:
        top, name = area.split("/")
        assert top == "groups" and name and not name.startswith(".")


def test_one_session_key_builder() -> None:
    assert dm_session_key("ann") == "ann:dm" and is_dm_session_key("ann:dm")
    assert heartbeat_session_key("ann") == "ann:heartbeat"
    assert not is_dm_session_key(heartbeat_session_key("ann"))
    assert group_session_key("telegram", "-5") == "telegram:group:-5"
    assert not is_dm_session_key(group_session_key("telegram", "dm"))
