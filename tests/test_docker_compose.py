"""docker-compose.yml parses and wires the volume and the health check (Docker itself is not
available in CI, so this checks the file, not a running container)."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


def test_compose_file_is_valid_yaml_with_volume_and_healthcheck():
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    service = data["services"]["clawgate"]
    assert service["healthcheck"]["test"] == ["CMD", "clawgate", "healthcheck"]
    assert "clawgate-data:/data" in service["volumes"]
    assert "clawgate-data" in data["volumes"]
    assert service["environment"]["CLAWGATE_HEALTH__PORT"] == "8787"


def _seconds(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text)


def test_stop_grace_period_leaves_room_for_the_gateway_grace():
    service = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]["clawgate"]
    grace = float(service["environment"]["CLAWGATE_STOP_GRACE_SECONDS"])
    assert grace < 10
    assert _seconds(service["stop_grace_period"]) >= grace + 5  # closing takes a moment too
    for name in ("CLAWGATE_LLM__MODEL", "CLAWGATE_LLM__BASE_URL", "CLAWGATE_TIMEZONE"):
        assert name in service["environment"]


def test_dockerfile_installs_dependencies_before_copying_the_code():
    lines = (COMPOSE.parent / "Dockerfile").read_text(encoding="utf-8").splitlines()
    deps = next(i for i, line in enumerate(lines) if "requirements.txt" in line)
    code = next(i for i, line in enumerate(lines) if line.startswith("COPY gateway"))
    assert deps < code
    assert any("pip install --no-deps ." in line for line in lines[code:])
