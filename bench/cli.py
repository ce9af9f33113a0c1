"""Start-up time of the operator CLI: the wall time of whole `cleanair` processes.

Each command runs as the installed `cleanair` would, in a fresh interpreter, on a SQLite
database made beforehand (as an operator's is). The baseline is `python -c pass` with the
same interpreter, measured in the same rounds, so the ratio shows what the CLI adds to a
bare interpreter start on this machine at this moment. The aim (under 0.3 s for every
command but `serve`) is reported, not asserted: the machines are shared and noisy.

Run alone: `.venv/bin/python -m bench.cli`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 9
AIM_S = 0.3
CLI = Path(sys.executable).with_name("cleanair")
#: Each with a fresh name where it adds, so every run does the same work.
COMMANDS: tuple[tuple[str, list[str]], ...] = (
    ("cleanair --help", ["--help"]),
    ("cleanair users add USER", ["users", "add", "{n}"]),
    ("cleanair users list", ["users", "list"]),
    ("cleanair pairing-code USER", ["pairing-code", "alice"]),
    ("cleanair partners list", ["partners", "list"]),
    ("cleanair usage USER", ["usage", "alice"]),
    ("cleanair connections list USER", ["connections", "list", "alice"]),
    ("cleanair clients add LABEL", ["clients", "add", "c{n}"]),
    ("cleanair network list", ["network", "list"]),
)


def _wall_time(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, timeout=60)
    return time.perf_counter() - started


def measure(runs: int = RUNS) -> dict[str, float]:
    """Median wall time in seconds of each command and of the baseline ("python -c pass")."""
    with tempfile.TemporaryDirectory() as folder:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLEANAIR_")}
        env["CLEANAIR_DATABASE"] = str(Path(folder) / "cleanair.db")
        subprocess.run(
            [str(CLI), "users", "add", "alice"], env=env, check=True, capture_output=True
        )
        times: dict[str, list[float]] = {"python -c pass": []}
        times |= {name: [] for name, _ in COMMANDS}
        # Rounds alternate the baseline and every command, so noise hits them alike.
        for run in range(runs):
            times["python -c pass"].append(_wall_time([sys.executable, "-c", "pass"], env))
            for name, argv in COMMANDS:
                args = [arg.format(n=f"user{run}") for arg in argv]
                times[name].append(_wall_time([str(CLI), *args], env))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    medians = measure()
    base = medians.pop("python -c pass")
    print(f"operator CLI start-up (whole processes, median of {RUNS}; bench/cli.py):")
    print(f"  {'python -c pass (baseline)':<34} {base * 1e3:7.0f} ms")
    for name, seconds in medians.items():
        print(f"  {name:<34} {seconds * 1e3:7.0f} ms  {seconds / base:5.1f}x baseline")
    slowest = max(medians.values())
    verdict = "met" if slowest < AIM_S else "NOT met"
    print(f"aim: every command but serve under {AIM_S:g} s: slowest {slowest:.2f} s, {verdict}")


if __name__ == "__main__":
    main()
