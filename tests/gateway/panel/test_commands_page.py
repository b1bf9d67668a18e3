"""The panel's commands page: a person's recorded command runs beside them, and the
requests waiting for the owner; every field is outside text, shown escaped."""

from __future__ import annotations

import time

from gateway.features.exec.approvals_store import Approval, ApprovalStore, RunRecord


async def test_commands_page_lists_runs_and_waiting_requests(rig):
    await rig.login()
    empty = await (await rig.client.get("/p/owner/commands")).text()
    assert "no commands ran for this person" in empty and "nothing waiting" in empty
    store = ApprovalStore(rig.gateway.state.database)
    now = time.time()
    await store.record_run(
        RunRecord(
            "owner",
            "echo <script>alert(1)</script> | wc -c",
            ".",
            False,
            "telegram:42",
            0,
            "exited",
            0.25,
            31,
            now,
        )
    )
    await store.record_run(
        RunRecord(
            "telegram-42", "ls secret-of-42", ".", False, "allowlist", 0, "exited", 0.1, 5, now
        )
    )
    await store.add(
        Approval(
            "ABC234",
            "owner",
            "/w/owner",
            "owner:dm",
            "telegram",
            "42",
            "make backup",
            "notes",
            False,
            60.0,
            "d" * 64,
            "pending",
            False,
            now,
            now + 600,
        )
    )
    page = await (await rig.client.get("/p/owner/commands")).text()
    assert 'href="/p/owner/commands" class="on"' in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "telegram:42" in page and "0.25 s" in page and "exited" in page
    assert "ABC234" in page and "make backup" in page
    assert "secret-of-42" not in page  # another person's runs are on their own page
    other = await (await rig.client.get("/p/telegram-42/commands")).text()
    assert "secret-of-42" in other and "ABC234" not in other
    assert (await rig.client.get("/p/nobody/commands")).status == 404
