"""docker-compose.yml parses and wires the volume and the health check (Docker itself is not
available in CI, so this checks the file, not a running container)."""

from __future__ import annotations

from pathlib import Path

import pytest

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


def test_compose_file_is_valid_yaml_with_volume_and_healthcheck():
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    service = data["services"]["clawgate"]
    assert service["healthcheck"]["test"] == ["CMD", "clawgate", "healthcheck"]
    assert "clawgate-data:/data" in service["volumes"]
    assert "clawgate-data" in data["volumes"]
    assert service["environment"]["CLAWGATE_HEALTH__PORT"] == "8787"
