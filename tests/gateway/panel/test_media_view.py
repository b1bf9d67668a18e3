"""The session view shows what came with a message: a thumbnail for a photo (served only from
an inbox's resized copies), the transcript of a voice note, what could not be used."""

from __future__ import annotations

import json

from gateway.agent.sessions import transcript_path
from tests.fakes.media_files import jpeg


async def test_attachments_and_transcripts_in_the_session_view(rig):
    await rig.login()
    workspace = rig.gateway.settings.workspaces_dir / "owner"
    seen = workspace / "inbox" / "2026-03-01" / ".seen"
    seen.mkdir(parents=True)
    (seen / "101500-photo.jpg").write_bytes(jpeg(64, 48))
    path = transcript_path(workspace, "owner:dm")
    path.parent.mkdir(exist_ok=True)
    lines = [
        {"type": "session", "key": "owner:dm"},
        {
            "ts": "2026-03-01T10:15:00+00:00",
            "type": "user",
            "text": "[photo ...] look",
            "media": [
                {
                    "kind": "image",
                    "label": "photo",
                    "file": "inbox/2026-03-01/101500-photo.jpg",
                    "seen": "inbox/2026-03-01/.seen/101500-photo.jpg",
                    "usable": True,
                }
            ],
        },
        {
            "ts": "2026-03-01T10:16:00+00:00",
            "type": "user",
            "text": "[voice message] ...",
            "media": [
                {
                    "kind": "audio",
                    "label": "voice message",
                    "duration": 4.2,
                    "transcript": "call <mum> at six",
                    "usable": True,
                },
                {"kind": "video", "label": "video", "error": "I can't open a video yet"},
                "junk",
                {"kind": ["not", "a", "string"]},
            ],
        },
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    page = await (await rig.client.get(f"/p/owner/session/{path.name}")).text()
    src = "/p/owner/inbox-image?path=inbox%2F2026-03-01%2F.seen%2F101500-photo.jpg"
    assert f'<img class="thumb" src="{src}"' in page  # the query value URL-encoded
    assert "heard: call &lt;mum&gt; at six" in page  # escaped
    assert "not used: I can&#39;t open a video yet" in page  # escaped
    image = await rig.client.get(src)
    assert image.status == 200 and image.content_type == "image/jpeg"
    assert (await image.read())[:2] == b"\xff\xd8"


async def test_the_thumbnail_route_serves_nothing_else(rig):
    await rig.login()
    workspace = rig.gateway.settings.workspaces_dir / "owner"
    for bad in (
        "MEMORY.md",
        "inbox/../MEMORY.md",
        "inbox/.seen/../../USER.md",
        "../telegram-42/inbox/x/.seen/a.jpg",
        "inbox/2026-03-01/photo.jpg",
        "",
    ):
        response = await rig.client.get("/p/owner/inbox-image", params={"path": bad})
        assert response.status == 404, bad
    assert (workspace / "MEMORY.md").exists()
    # Another person's images are not reachable through this person's URL, nor a person
    # this login may not see.
    assert (await rig.client.get("/p/nobody/inbox-image?path=inbox/a/.seen/b.jpg")).status == 404
