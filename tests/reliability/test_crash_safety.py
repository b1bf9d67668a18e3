"""Crash safety: `clawgate run` as a real process, killed with SIGKILL at random points.

Five people keep writing through the fake Telegram server to a model that takes about 300 ms
per answer while the gateway is killed and restarted 20 times, a third of the kills aimed
between a turn's transcript append and its outbox write (tests/reliability/kill_harness.py
says how). Seeded, so a failure replays (CRASH_SEED=N runs another seed); bench/crash_kill.py
runs the same harness in issue 32's shape (3 people, 30 kills, 240 messages) and prints the
figures, the send window's p50 and p99 with them.

Nothing may be lost; a duplicate is allowed only where the platform accepted a send and the
kill came before the outbox recorded it (the documented crash window, docs/reliability.md),
at most one in this short run (bench/crash_kill.py measures the rate over 240 messages);
the model is never asked to answer nothing, no message has two answers in its transcript,
and no file is torn.
"""

from __future__ import annotations

import os

import pytest

from tests.reliability.kill_harness import KillPlan, run_kill_test

SEED = int(os.environ.get("CRASH_SEED", "20261129"))


@pytest.mark.timeout(600)  # 20 kill -9 and restarts of a real process
async def test_kill_nine_at_random_points_loses_nothing(tmp_path, anthropic_server):
    plan = KillPlan(kills=20, messages=80, seed=SEED)
    report = await run_kill_test(tmp_path, plan, anthropic_server)
    print("\ncrash safety:", report.summary())
    log = (tmp_path / "gateway.log").read_text(errors="replace")[-3000:]
    assert report.lost_count == 0, f"unanswered: {report.lost}\n{log}"
    assert report.bad_requests == 0  # never an empty or missing user message
    assert report.double_answers == []  # never two answers to one message
    assert report.unexplained == []  # duplicates only from the documented crash window
    # A duplicate only from the documented window (platform accepted, kill before the outbox
    # recorded it): its rate, under 1%, is bench/crash_kill.py's figure over 240 messages;
    # 80 messages cannot show 1%, so this short run allows one such copy and no more.
    assert report.duplicates == report.window_duplicates <= 1
    assert report.lines_lost == []
    # the case the aimed kills are for happened: a reply on disk in a transcript only
    assert report.replies_in_window >= 1


@pytest.mark.timeout(600)  # 8 kill -9 and restarts of a real process, streaming
async def test_kill_nine_while_replies_stream_into_previews_never_doubles_a_reply(
    tmp_path, anthropic_server
):
    """Streaming into edited preview messages (no drafts), answers written over about half a
    second: a kill lands while previews grow, between a preview and its reply, and after a
    reply's edit was accepted but not recorded. The reply is an edit of its preview, so a
    repeat changes nothing: no reply appears twice."""
    plan = KillPlan(
        kills=8,
        messages=32,
        seed=SEED + 26,
        stream_delay=0.05,
        extra_env=(("CLAWGATE_TELEGRAM__STREAMING_DRAFTS", "false"),),
    )
    report = await run_kill_test(tmp_path, plan, anthropic_server)
    print("\ncrash safety while streaming:", report.summary())
    log = (tmp_path / "gateway.log").read_text(errors="replace")[-3000:]
    assert report.lost_count == 0, f"unanswered: {report.lost}\n{log}"
    assert report.preview_updates > 0  # the replies did stream
    assert report.duplicates == 0, report.unexplained
    assert report.double_answers == [] and report.bad_requests == 0
    assert report.lines_lost == []
