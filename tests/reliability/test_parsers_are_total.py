"""Every parser of a file a person or the model can write is total.

A property test: hypothesis feeds each parser hostile input (nesting thousands deep, numbers
with thousands of digits or out of every range, invalid UTF-8, lone surrogates, control and
bidi characters, megabyte strings, and each file's own shape with those in its fields) and
each must return a value or its typed "broken" result, never raise anything else.

The parsers and what each may answer:
- schedule file (`scheduler.jobs.parse_file`/`read_jobs`): a JobFile, or ScheduleFileError;
  one job (`parse_job`) and `when` (`parse_when`): a value, or ScheduleError;
- schedule state journal (`ScheduleState.replay`, `load_state`): a state, always;
- HEARTBEAT.md (`parse_checklist`, `load_checklist`): a Checklist, always (problems inside);
  an interval (`parse_interval`): a value, or ValueError;
- heartbeat state (`HeartbeatState.from_json`): a state, or ValueError; `load_state`: always;
- SKILL.md (`parse_skill`): a Skill, or a SkillProblem;
- session transcripts (`Transcript.load`, `SessionStore` opening one): always;
- recall indexing of transcripts (`transcript_lines`, `transcript_key`): always;
- clawgate.toml (`load_settings`): Settings, or ConfigError;
- any JSON state (`memory.atomic.loads_bounded`): a value, or BrokenFile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gateway.agent.sessions import SessionStore, transcript_path
from gateway.agent.transcript import Transcript
from gateway.capabilities.skill_file import Skill, SkillProblem, parse_skill
from gateway.clock import FixedClock
from gateway.config.settings import ConfigError, Settings, load_settings
from heartbeat.checklist import Checklist, load_checklist, parse_checklist, parse_interval
from heartbeat.store import HeartbeatState
from heartbeat.store import load_state as load_heartbeat_state
from memory.atomic import BrokenFile, loads_bounded
from memory.chunking import transcript_key, transcript_lines
from memory.layout import HEARTBEAT_FILE, HEARTBEAT_STATE_FILE, SCHEDULE_FILE
from scheduler.jobs import JobFile, ScheduleFileError, parse_file, parse_job, read_jobs
from scheduler.recurrence import ScheduleError
from scheduler.state import ScheduleState
from scheduler.state import load_state as load_schedule_state
from scheduler.when import parse_when

ZONES = st.sampled_from(
    [
        ZoneInfo(z)
        for z in (
            "UTC",
            "Europe/Berlin",
            "Pacific/Kiritimati",
            "Pacific/Pago_Pago",
            "America/St_Johns",
        )
    ]
)
NOWS = st.sampled_from(
    [
        datetime(2026, 3, 29, 0, 30, tzinfo=UTC),
        datetime(9999, 12, 31, 12, tzinfo=UTC),
        datetime(1, 1, 2, tzinfo=UTC),
    ]
)
HOSTILE = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))

# -- hostile pieces ------------------------------------------------------------------------

ODD_CHARS = "\x00\x1b\x7f\u202e\u2066\u200f\ufeff\u2028\ud800\udfff\U0010ffff"
odd_text = st.text(
    alphabet=st.sampled_from(list(ODD_CHARS) + list("ab [{}]:-\"'\\\n#*,")), max_size=40
)
huge_numbers = st.sampled_from(
    [
        "9" * 5_000,
        "-" + "9" * 400,
        "1e999",
        "-1e999",
        "NaN",
        "Infinity",
        "1" + "0" * 30,
        "99999999999999",
        "0",
        "-1",
        "4.5",
        "0x10",
        "1_000",
    ]
)
deep = st.builds(
    lambda n, open_, close: open_ * n + close * (n // 2),
    st.integers(30, 60_000),
    st.sampled_from(["[", "{", '{"a": ', "- "]),
    st.sampled_from(["]", "}", "", " "]),
)
big = st.builds(lambda n, s: s * n, st.integers(10_000, 400_000), st.sampled_from(["x", "é", "[]"]))
words = st.sampled_from(
    [
        "in",
        "every",
        "at",
        "cron",
        "days",
        "hours",
        "weeks",
        "minutes",
        "tomorrow",
        "monday",
        "9pm",
        "noon",
        "and",
        "on",
        "2026-12-01",
        "9999-12-31",
        "0001-01-01",
        "T23:59",
        "+14:00",
        "-14:00",
        "*",
        "*/0",
        "L",
        "#",
        "W",
        "?",
        "weekday",
        "next",
    ]
)
when_like = st.one_of(
    st.lists(st.one_of(words, huge_numbers), min_size=1, max_size=8).map(" ".join),
    st.builds(lambda n, u: f"in {n} {u}", huge_numbers, st.sampled_from(["days", "weeks", "s"])),
    st.builds(lambda n, u: f"every {n} {u}", huge_numbers, st.sampled_from(["hours", "min"])),
    st.builds(
        lambda d, t, z: f"{d}T{t}{z}",
        st.sampled_from(["9999-12-31", "0001-01-01", "2026-02-30", "2026-03-29"]),
        st.sampled_from(["23:59", "00:00", "02:30", "25:00"]),
        st.sampled_from(["", "+14:00", "-14:00", "Z", "+99:00"]),
    ),
    odd_text,
    big,
    deep,
)
scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    odd_text,
    when_like,
    huge_numbers.map(lambda n: int(n) if n.isdigit() and len(n) < 4000 else n),
)
json_value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "kind",
                    "text",
                    "when",
                    "created",
                    "e",
                    "job",
                    "key",
                    "due",
                    "type",
                    "tool_calls",
                    "arguments",
                    "usage",
                    "alerts",
                    "task_runs",
                    "tokens_today",
                ]
            ),
            inner,
            max_size=6,
        ),
    ),
    max_leaves=12,
)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=True, default=str)


def splice(text: str, junk: str, where: float) -> str:
    """`junk` inserted into `text` at a relative position (a hand edit gone wrong)."""
    cut = int(len(text) * where)
    return text[:cut] + junk + text[cut:]


junk = st.one_of(deep, huge_numbers, odd_text, big)
job_entry = st.fixed_dictionaries(
    {
        "id": st.one_of(st.integers(1, 9), scalar),
        "kind": st.sampled_from(["message", "agent", "x"]),
        "text": st.one_of(st.just("hi"), odd_text, big),
        "when": when_like,
    },
    optional={"created": st.one_of(scalar, when_like)},
)
jobs_file = st.builds(
    lambda jobs, next_id: _dumps({"version": 1, "next_id": next_id, "jobs": jobs}),
    st.lists(job_entry, max_size=4),
    scalar,
)
hostile_text = st.one_of(
    odd_text,
    deep,
    big,
    huge_numbers,
    json_value.map(_dumps),
    st.builds(splice, json_value.map(_dumps), junk, st.floats(0, 1)),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "replace")),
)
hostile_bytes = st.one_of(
    st.binary(max_size=300),
    hostile_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
)


def _tmp() -> Path:
    return Path(tempfile.mkdtemp(prefix="hostile-"))


# -- schedule --------------------------------------------------------------------------------


RED_TEAM_JOBS = _dumps({"jobs": [{"id": 1, "text": "x", "when": "in 99999999999999 days"}]})
RED_TEAM_DEEP = '{"jobs": ' + "[" * 30_000 + "]" * 30_000 + "}"


@HOSTILE
@given(
    st.one_of(jobs_file, hostile_text, st.builds(splice, jobs_file, junk, st.floats(0, 1))),
    ZONES,
    NOWS,
)
@example(RED_TEAM_JOBS, ZoneInfo("UTC"), datetime(2026, 3, 2, tzinfo=UTC))
@example(RED_TEAM_DEEP, ZoneInfo("UTC"), datetime(2026, 3, 2, tzinfo=UTC))
def test_the_schedule_file_parser_is_total(text: str, zone: ZoneInfo, now: datetime) -> None:
    try:
        parsed = parse_file(text, zone, now)
    except ScheduleFileError as exc:
        assert str(exc)
        return
    assert isinstance(parsed, JobFile)
    for job in parsed.jobs:  # what was accepted can be planned without surprises
        job.first(zone)


@HOSTILE
@given(st.one_of(job_entry, json_value), ZONES, NOWS)
@example(
    {"id": 1, "text": "x", "when": "9999-12-31T23:59-14:00"},
    ZoneInfo("UTC"),
    datetime(2026, 3, 2, tzinfo=UTC),
)
def test_one_job_is_a_job_or_a_schedule_error(raw: Any, zone: ZoneInfo, now: datetime) -> None:
    try:
        parse_job(raw, zone, now)
    except ScheduleError as exc:
        assert len(str(exc)) < 2_000


@HOSTILE
@given(when_like, ZONES, NOWS)
def test_when_is_a_schedule_or_a_schedule_error(text: str, zone: ZoneInfo, now: datetime) -> None:
    try:
        schedule = parse_when(text, zone, now)
    except ScheduleError:
        return
    if not schedule.recurring:
        schedule.first(now, zone)


@HOSTILE
@given(st.lists(st.one_of(json_value.map(_dumps), hostile_text), max_size=6))
def test_the_schedule_state_journal_always_replays(lines: list[str]) -> None:
    assert isinstance(ScheduleState.replay("\n".join(lines) + "\n"), ScheduleState)


@SLOW
@given(hostile_bytes, hostile_bytes)
def test_reading_schedule_files_from_disk_is_total(jobs: bytes, state: bytes) -> None:
    workspace = _tmp()
    (workspace / SCHEDULE_FILE).write_bytes(jobs)
    (workspace / SCHEDULE_FILE.replace(".json", "-state.jsonl")).write_bytes(state)
    with contextlib.suppress(ScheduleFileError):
        read_jobs(workspace, ZoneInfo("Europe/Berlin"))
    assert isinstance(load_schedule_state(workspace), ScheduleState)


# -- heartbeat -------------------------------------------------------------------------------

checklist_shaped = st.builds(
    lambda name, interval, prompt, head: (
        f"{head}\ntasks:\n- name: {name}\n  interval: {interval}\n  prompt: {prompt}\n"
    ),
    st.one_of(st.just("inbox"), odd_text),
    st.one_of(huge_numbers.map(lambda n: n + "w"), when_like, odd_text),
    st.one_of(st.just("check it"), odd_text),
    st.one_of(odd_text, big, st.just("<!--")),
)


@HOSTILE
@given(st.one_of(checklist_shaped, hostile_text))
@example("tasks:\n- name: a\n  interval: 99999999999999999999w\n  prompt: A\n")
def test_heartbeat_md_is_always_a_checklist(text: str) -> None:
    checklist = parse_checklist(text)
    assert isinstance(checklist, Checklist)
    checklist.render(checklist.due({}, datetime(2026, 3, 2, tzinfo=UTC)))


@HOSTILE
@given(st.one_of(huge_numbers.map(lambda n: n + "s"), when_like, odd_text))
def test_an_interval_is_a_value_or_a_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        parse_interval(text)


@HOSTILE
@given(
    st.one_of(
        json_value.map(_dumps),
        hostile_text,
        st.builds(
            lambda v: _dumps({"alerts": v, "task_runs": v, "last_beat_at": v, "tokens_today": v}),
            json_value,
        ),
    )
)
def test_heartbeat_state_is_a_state_or_a_value_error(text: str) -> None:
    now = datetime(2026, 3, 2, tzinfo=UTC)
    try:
        state = HeartbeatState.from_json(text)
    except ValueError:
        return
    state.delivered_recently("x", now, timedelta(hours=1))  # usable: aware times only
    state.remember_alert("x", now, timedelta(hours=1))
    state.to_json()


@SLOW
@given(hostile_bytes, hostile_bytes)
def test_heartbeat_files_from_disk_never_raise(checklist: bytes, state: bytes) -> None:
    workspace = _tmp()
    (workspace / HEARTBEAT_FILE).write_bytes(checklist)
    (workspace / HEARTBEAT_STATE_FILE).write_bytes(state)
    assert isinstance(load_checklist(workspace), Checklist)
    assert isinstance(load_heartbeat_state(workspace), HeartbeatState)


# -- skills ----------------------------------------------------------------------------------

yaml_junk = st.one_of(
    junk,
    st.sampled_from(
        [
            "&a [*a]",
            "!!python/object/apply:os.system ['true']",
            "? ",
            "|\n  x",
            ">-",
            "*x",
            "!!binary AAAA",
            "{a: [b, {c: d}]}",
            "'unclosed",
            '"\\ud800"',
            "!!int " + "9" * 5000,
        ]
    ),
)
skill_shaped = st.builds(
    lambda name, desc, extra: f"---\nname: {name}\ndescription: {desc}\n{extra}\n---\nbody\n",
    st.one_of(st.just("evil"), odd_text),
    st.one_of(deep, yaml_junk, odd_text),
    yaml_junk,
)


@HOSTILE
@given(st.one_of(skill_shaped.map(lambda t: t.encode("utf-8", "surrogatepass")), hostile_bytes))
@example(b"---\nname: evil\ndescription: " + b"[" * 30_000 + b"\n---\n")  # the red team's
def test_skill_md_is_a_skill_or_a_problem(data: bytes) -> None:
    folder = _tmp() / "evil"
    folder.mkdir()
    (folder / "SKILL.md").write_bytes(data)
    result = parse_skill(folder / "SKILL.md", "workspace", description_max_chars=1024)
    assert isinstance(result, Skill | SkillProblem)


# -- sessions --------------------------------------------------------------------------------


@SLOW
@given(
    st.lists(
        st.one_of(
            json_value.map(_dumps),
            hostile_text,
            st.builds(
                lambda v: _dumps({"type": "assistant", "text": "x", "tool_calls": v, "usage": v}),
                json_value,
            ),
        ),
        max_size=6,
    )
)
def test_session_transcripts_always_open(lines: list[str]) -> None:
    workspace = _tmp()
    path = transcript_path(workspace, "k")
    path.parent.mkdir()
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    assert isinstance(Transcript(path).load(), list)
    store = SessionStore(FixedClock(datetime(2026, 3, 2, tzinfo=UTC)))
    session = asyncio.run(store.get(workspace, "k"))
    assert all(isinstance(m.text, str) for m in session.history)
    text = path.read_text("utf-8", "replace")
    transcript_lines(text)
    transcript_key(text.split("\n", 1)[0])


# -- configuration and JSON state ------------------------------------------------------------

toml_shaped = st.builds(
    lambda section, key, value: f"[{section}]\n{key} = {value}\n",
    st.sampled_from(["llm", "health", "scheduler", "tools", "heartbeat"]),
    st.sampled_from(["port", "max_attempts", "model", "rescan_seconds", "every"]),
    st.one_of(huge_numbers, deep, odd_text.map(json.dumps), big.map(json.dumps)),
)


@SLOW
@given(st.one_of(toml_shaped.map(str.encode), hostile_bytes))
def test_the_config_file_is_settings_or_a_config_error(data: bytes) -> None:
    path = _tmp() / "clawgate.toml"
    path.write_bytes(data)
    try:
        assert isinstance(load_settings(path), Settings)
    except ConfigError as exc:
        assert "\n" not in str(exc).strip() or len(str(exc)) < 5_000


@HOSTILE
@given(st.one_of(hostile_text, hostile_bytes))
def test_bounded_json_is_a_value_or_broken(data: str | bytes) -> None:
    try:
        loads_bounded(data)
    except BrokenFile as exc:
        assert str(exc)
