"""The production layout runs scrapes only in the worker service, and the README says so."""

from __future__ import annotations

from pathlib import Path

import yaml


def test_compose_runs_the_scheduler_only_in_the_worker(repo_root: Path) -> None:
    services = yaml.safe_load((repo_root / "docker-compose.yml").read_text())["services"]
    assert "--no-scheduler" in services["web"]["command"]
    assert services["worker"]["command"] == ["gpufit", "worker"]
    assert services["worker"]["depends_on"]["migrate"]["condition"] == (
        "service_completed_successfully"
    )
    readme = (repo_root / "README.md").read_text()
    assert "`worker` service that runs the scheduler alone" in readme
