"""The README's walkthrough, run as it stands against a real server: its calls must answer
what its comments say, with the dates it computes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from support.servers import CLI, running_server, server_env

pytestmark = pytest.mark.e2e

README = Path(__file__).parents[2] / "README.md"


def walkthrough() -> str:
    text = README.read_text()
    found = re.search(r"<!-- walkthrough:[^>]*-->\n```sh\n(.*?)```", text, flags=re.DOTALL)
    assert found is not None, "the README has no walkthrough block"
    return found.group(1)


def test_the_readme_walkthrough_calls_every_endpoint(tmp_path: Path) -> None:
    env = server_env(tmp_path, CLEANAIR_DEFAULT_NETWORK="true", CLEANAIR_PLAN_WORKERS="1")
    with running_server(env, tmp_path / "server.log") as server:
        run = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", walkthrough()],
            env={**env, "BASE": server.base, "CLEANAIR": CLI},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert '"token":"ca_tst_' in out  # the pairing answer, shown once
    # quota, score by coordinates, conditions, score by Wi-Fi, forecast, route enrichment
    assert out.count(" -> 200") == 6, out
    assert '"indexes":[{"code":"eu_eaqi_2024"' in out
    assert out.count(" -> 422") == 1, out  # the forecast by address, from loopback
    assert '"location":"Helsinki' in out
    plan, departures = out.strip().splitlines()[-2:]
    assert plan.startswith('{"status":"completed"'), plan
    assert '"routes":[' in plan
    assert departures.startswith('{"status":"completed"'), departures
    assert departures.count('"start_time"') == 5 + 1  # each departure's, and the best's
