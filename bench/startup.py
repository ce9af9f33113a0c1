"""Start-up of `cleanair serve` and of the operator CLI, as whole processes.

`serve` runs with the shipped defaults on a fresh SQLite database (its first start imports
the central-Helsinki network, later starts read it back), timed from the process's start to
its first 200 from /livez and to the first 200 of an authenticated score (a user paired
through the CLI and the API beforehand). Three cases, in one run:

- installed: the bytecode as `make install` leaves it (the venv's and ours, compiled);
- first start, cold: no bytecode at all (`PYTHONPYCACHEPREFIX` names an empty folder, so the
  installed caches are not found, and `PYTHONDONTWRITEBYTECODE` writes none): what every
  start cost before `make install` compiled it, where nothing is ever cached;
- the CLI from a fresh install: its first run compiling into an empty cache folder, then a
  second run reading it.

The baselines, measured in the same rounds: for `serve`, a bare Litestar app with one route
under uvicorn, started the same way (what any server on this stack pays on this machine at
this moment); for the CLI, `python -c pass`. The aims (serve's first
answer under 2 s, every CLI command under 0.3 s) are reported, not asserted: the machines
are shared and noisy.

Run alone: `.venv/bin/python -m bench.startup`.
"""

from __future__ import annotations

import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

RUNS = 3
SERVE_AIM_S = 2.0
CLI_AIM_S = 0.3
CLI = Path(sys.executable).with_name("cleanair")
START_DEADLINE_S = 300.0
SCORE = {"lat": 60.17, "lon": 24.94}
#: The serve baseline: one Litestar route under uvicorn, on the port given.
BARE_SERVER = """
import sys
import uvicorn
from litestar import Litestar, get

@get("/livez")
async def livez() -> dict[str, str]:
    return {"status": "ok"}

uvicorn.run(Litestar([livez]), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""
#: Store-only commands, each the first the operator types on a machine.
CLI_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("users", "list"),
    ("pairing-code", "alice"),
    ("network", "list"),
)


def _env(folder: Path) -> dict[str, str]:
    """This environment without cleanair settings or bytecode switches, on `folder`'s
    database: the shipped defaults, the bytecode as installed."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("CLEANAIR_")
        and name not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    return {**env, "CLEANAIR_DATABASE": str(folder / "cleanair.db")}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(env: Mapping[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(CLI), *args], env=dict(env), capture_output=True, text=True, timeout=300, check=True
    )
    return done.stdout


def _paired(env: Mapping[str, str], base: str) -> dict[str, str]:
    code = _run(env, "pairing-code", "alice").strip()
    redeemed = httpx.post(
        f"{base}/v1/connections/token", json={"code": code, "name": "bench"}, timeout=30
    )
    redeemed.raise_for_status()
    return {"Authorization": f"Bearer {redeemed.json()['token']}"}


def serve_once(
    env: Mapping[str, str], headers: Mapping[str, str] | None, *, bare: bool = False
) -> tuple[float, float]:
    """Seconds from starting `cleanair serve` (with `bare`, the baseline server) to its first
    200 from /livez, and to the first 200 of a score with `headers` (nan without them)."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    command = (
        [sys.executable, "-c", BARE_SERVER, str(port)]
        if bare
        else [str(CLI), "serve", "--port", str(port)]
    )
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        livez = _first_ok(process, lambda: httpx.get(f"{base}/livez", timeout=5), started)
        if headers is None:
            return livez, math.nan
        score = _first_ok(
            process,
            lambda: httpx.post(
                f"{base}/v1/airquality/score", json=SCORE, headers=dict(headers), timeout=60
            ),
            started,
        )
        return livez, score
    finally:
        process.terminate()
        process.wait(timeout=60)


def _first_ok(
    process: subprocess.Popen[bytes], ask: Callable[[], httpx.Response], started: float
) -> float:
    """Seconds since `started` when `ask` first answers 200; polled every 10 ms, bounded."""
    while True:
        try:
            if ask().status_code == 200:
                return time.perf_counter() - started
        except httpx.TransportError:
            pass
        if process.poll() is not None:
            raise SystemExit(f"cleanair serve exited with {process.returncode}")
        if time.perf_counter() - started > START_DEADLINE_S:
            raise SystemExit("cleanair serve did not answer")
        time.sleep(0.01)


def _wall(argv: list[str], env: Mapping[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=dict(env), check=True, stdout=subprocess.DEVNULL, timeout=300)
    return time.perf_counter() - started


def measure_serve() -> dict[str, tuple[float, float]]:
    """Median (livez, score) seconds of each case."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        installed = _env(folder)
        _run(installed, "users", "add", "alice")
        # The first start imports the default network and stores it; every later one reads it.
        first = serve_once(installed, None)
        headers = _pair_once(installed)
        times: dict[str, list[tuple[float, float]]] = {"bare": [], "installed": [], "cold": []}
        for _ in range(RUNS):  # rounds alternate the cases, so noise hits them alike
            for case, figures in times.items():
                with tempfile.TemporaryDirectory() as empty:
                    env = dict(installed)
                    if case == "cold":
                        env |= {"PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"}
                    if case == "bare":
                        figures.append(serve_once(env, None, bare=True))
                    else:
                        figures.append(serve_once(env, headers))
    medians = {
        case: (
            statistics.median(t[0] for t in values),
            statistics.median(t[1] for t in values),
        )
        for case, values in times.items()
    }
    return {
        "bare Litestar + uvicorn (baseline)": medians.pop("bare"),
        "first start (imports the network)": (first[0], math.nan),
        **medians,
    }


def _pair_once(env: Mapping[str, str]) -> dict[str, str]:
    """A connection for the score requests, paired against a server of its own."""
    port = _free_port()
    process = subprocess.Popen(
        [str(CLI), "serve", "--port", str(port)],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _first_ok(process, lambda: httpx.get(f"{base}/livez", timeout=5), time.perf_counter())
        return _paired(env, base)
    finally:
        process.terminate()
        process.wait(timeout=60)


def measure_cli() -> dict[str, tuple[float, float, float]]:
    """Per command: the median (first run on a fresh cache, second run, installed) seconds,
    and the baseline under "python -c pass"."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        installed = _env(folder)
        _run(installed, "users", "add", "alice")
        names = ["python -c pass", *(" ".join(("cleanair", *argv)) for argv in CLI_COMMANDS)]
        argvs = [[sys.executable, "-c", "pass"], *([str(CLI), *argv] for argv in CLI_COMMANDS)]
        times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
        for _ in range(RUNS):
            for name, argv in zip(names, argvs, strict=True):
                with tempfile.TemporaryDirectory() as cache:
                    fresh = installed | {"PYTHONPYCACHEPREFIX": cache}
                    first = _wall(argv, fresh)
                    second = _wall(argv, fresh)
                times[name].append((first, second, _wall(argv, installed)))
    return {
        name: (
            statistics.median(t[0] for t in values),
            statistics.median(t[1] for t in values),
            statistics.median(t[2] for t in values),
        )
        for name, values in times.items()
    }


def main() -> None:
    serve = measure_serve()
    print(f"cleanair serve start-up (whole processes, median of {RUNS}; bench/startup.py):")
    print(f"  {'case':<36} {'first /livez 200':>17} {'first score 200':>16}")
    for case, (livez, score) in serve.items():
        shown = "" if math.isnan(score) else f"{score:15.2f}s"  # not asked
        print(f"  {case:<36} {livez:16.2f}s {shown:>16}")
    installed = serve["installed"][0]
    bare = serve["bare Litestar + uvicorn (baseline)"][0]
    verdict = "met" if installed < SERVE_AIM_S else "NOT met"
    print(
        f"aim: serve answers in under {SERVE_AIM_S:g} s installed: {installed:.2f} s, {verdict} "
        f"({installed / bare:.1f}x the bare server's {bare:.2f} s)"
    )
    cli = measure_cli()
    print(
        f"CLI from a fresh install (whole processes, median of {RUNS}): first run compiling "
        "into an empty cache, second run, and as installed"
    )
    base = cli["python -c pass"][2]
    for name, (first, second, warm) in cli.items():
        print(
            f"  {name:<30} first {first * 1e3:6.0f} ms  second {second * 1e3:6.0f} ms  "
            f"installed {warm * 1e3:6.0f} ms  ({warm / base:4.1f}x baseline)"
        )
    slowest = max(values[2] for name, values in cli.items() if name != "python -c pass")
    first_slowest = max(values[0] for name, values in cli.items() if name != "python -c pass")
    verdict = "met" if slowest < CLI_AIM_S else "NOT met"
    print(
        f"aim: every CLI command under {CLI_AIM_S:g} s installed: slowest {slowest:.2f} s, "
        f"{verdict} (first run on a fresh cache: slowest {first_slowest:.2f} s)"
    )


if __name__ == "__main__":
    main()
