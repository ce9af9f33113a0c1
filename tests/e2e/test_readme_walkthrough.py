"""The README's walkthrough, run as it stands against a real server: its calls must answer
what its comments say, with the dates it computes, twice in one day on one database, and it
must stop at the first answer that is not 2xx."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from support.servers import CLI, running_server, server_env

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
WALKTHROUGH = ROOT / "examples" / "walkthrough.sh"
DEPARTURES = ROOT / "examples" / "departures.sh"


def readme_block(marker: str) -> str:
    found = re.search(
        rf"<!-- {marker}:[^>]*-->\n```sh\n(.*?)```", README.read_text(), flags=re.DOTALL
    )
    assert found is not None, f"the README has no {marker} block"
    return found.group(1)


def test_the_readme_shows_the_scripts_as_they_are() -> None:
    assert readme_block("walkthrough") == WALKTHROUGH.read_text()
    assert readme_block("departures") == DEPARTURES.read_text()


def _run(script: Path, env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script)], env=dict(env), cwd=cwd, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


def _used_today(out: str) -> int:
    quota = [line for line in out.splitlines() if '"daily_used"' in line][-1]
    answer = json.loads(quota.removesuffix(" -> 200"))
    return int(answer["daily_used"])


def test_the_walkthrough_runs_twice_in_a_day_then_stops_at_the_daily_cap(
    tmp_path: Path,
) -> None:
    env = server_env(tmp_path, CLEANAIR_DEFAULT_NETWORK="true", CLEANAIR_PLAN_WORKERS="1")
    with running_server(env, tmp_path / "server.log") as server:
        script_env = {**env, "BASE": server.base, "CLEANAIR": CLI}
        first = _run(WALKTHROUGH, script_env, tmp_path)
        assert first.returncode == 0, first.stderr
        second = _run(WALKTHROUGH, script_env, tmp_path)
        assert second.returncode == 0, second.stderr
        token = re.search(r"^export TOKEN=(\S+)", second.stdout, flags=re.MULTILINE)
        assert token is not None, second.stdout
        departures = _run(DEPARTURES, {**script_env, "TOKEN": token.group(1)}, tmp_path)
        assert departures.returncode == 0, departures.stderr
        third = _run(WALKTHROUGH, script_env, tmp_path)

    for run in (first, second):
        out = run.stdout
        assert '"token":"ca_tst_' in out  # the pairing answer, shown once
        assert out.count(" -> 201") == 1, out
        # two quotas, score by coordinates, conditions, score by Wi-Fi, forecast, enrichment
        assert out.count(" -> 200") == 7, out
        assert out.count(" -> 202") == 1, out  # the plan's submission
        assert '"indexes":[{"code":"eu_eaqi_2024"' in out
        assert '"location":"Helsinki' in out
        plan = [line for line in out.splitlines() if line.startswith('{"status":')]
        assert len(plan) == 1, out
        assert plan[0].startswith('{"status":"completed"'), out
        assert '"routes":[' in plan[0]
    # A third of the day's 100 credits at most, each run.
    assert _used_today(first.stdout) == 32
    assert _used_today(second.stdout) == 64

    result = departures.stdout.strip().splitlines()[-1]
    assert result.startswith('{"status":"completed"'), departures.stdout
    assert result.count('"start_time"') == 5 + 1  # each departure's, and the best's

    # 89 used: the third run's plan no longer fits the day, and the script says so and stops.
    assert third.returncode != 0
    assert "walkthrough stopped: 429 Daily burst cap exhausted" in third.stderr, third.stderr
    assert '{"status":' not in third.stdout  # nothing after the refused plan ran
