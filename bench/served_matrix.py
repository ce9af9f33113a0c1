"""Section 2's served matrix: the score endpoint served by 1 and 2 API processes on SQLite and
on PostgreSQL, each against the bare endpoint of the same server in the same run.

    PYTHONPATH=. .venv/bin/python -m bench.served_matrix
    PYTHONPATH=. .venv/bin/python -m bench.served_matrix clients

The second (`clients`): PostgreSQL's score with 1 and 2 API processes driven by each client,
this process's Python one and wrk (`bench/wrk.py`, far less CPU a request), with how each
round's CPU divides between the client, the API processes and PostgreSQL's processes.
With 2 API processes, each round's eight connections by process are printed (`5-3`: one
held 5, the other 3), sampled once all are open: with a listening socket per process
(SO_REUSEPORT) the kernel spreads them by their addresses.

Per configuration: requests a second of the bare endpoint and of a score, their ratio, the
serving processes' CPU time a request; then PostgreSQL against SQLite (1 process: the aim of
issue 34 is 0.8x) and 2 processes against 1 on PostgreSQL (aim 1.5x), and the served aims
(score against bare, 1 process: 0.25x on SQLite, 0.2x on PostgreSQL). The client shares the
2-core machine with the servers (and PostgreSQL's own processes): compare ratios of one run,
and say how loaded the machine was (the load averages are printed).
"""

from __future__ import annotations

import asyncio
import os
import sys

from bench import postgres
from bench.served import CONNECTIONS, Stats, served
from bench.wrk import WRK_HOW, Shares, shares_line, split_line, wrk_available

#: Issue 34: served score against the bare endpoint of the same server, 1 API process.
SERVED_AIMS = {"SQLite": 0.25, "PostgreSQL": 0.2}
#: Issue 34: PostgreSQL's served score against SQLite's, 1 API process each.
POSTGRES_VS_SQLITE_AIM = 0.8
#: Issue 34: PostgreSQL's served score with 2 API processes against 1.
TWO_PROCESSES_AIM = 1.5


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min), {os.cpu_count()} cores"


async def main() -> dict[tuple[str, int], Stats]:
    """Print the matrix; its score figures by (database, processes)."""
    print(
        f"served score endpoint by database and API processes ({CONNECTIONS} keep-alive "
        f"connections from one client process; ratio to the bare endpoint of the same server; "
        f"{load()}):"
    )
    scores: dict[tuple[str, int], Stats] = {}
    for name in ("SQLite", "PostgreSQL"):
        for processes in (1, 2):
            location = "sqlite" if name == "SQLite" else postgres.test_server_url()
            cpu: dict[str, float] = {}
            splits: dict[str, list[list[int]]] = {}
            figures = await served(
                location, processes, only=("bare", "score"), cpu=cpu, splits=splits
            )
            scores[name, processes] = figures["score"]
            ratio = figures["score"][0] / figures["bare"][0]
            print(
                f"  {name:<10} {processes} process{'es' if processes > 1 else '  '}  "
                f"bare {figures['bare'][0]:>7,.0f}/s  score {figures['score'][0]:>7,.0f}/s  "
                f"{ratio:5.2f}x bare  server CPU a request: bare {cpu['bare']:,.0f} µs, "
                f"score {cpu['score']:,.0f} µs"
            )
            if processes > 1:
                print(f"    connections by process, score rounds: {split_line(splits['score'])}")
            if processes == 1:
                aim = SERVED_AIMS[name]
                print(
                    f"    aim (issue 34): score >= {aim}x bare, 1 process: "
                    f"{'met' if ratio >= aim else 'NOT met'}"
                )
    for processes in (1, 2):
        versus = scores["PostgreSQL", processes][0] / scores["SQLite", processes][0]
        met = "met" if versus >= POSTGRES_VS_SQLITE_AIM else "NOT met"
        verdict = f" (aim {POSTGRES_VS_SQLITE_AIM}x: {met})" if processes == 1 else ""
        print(
            f"  PostgreSQL vs SQLite, {processes} process{'es' if processes > 1 else ''}: "
            f"{versus:.2f}x{verdict}"
        )
    scaling = scores["PostgreSQL", 2][0] / scores["PostgreSQL", 1][0]
    print(
        f"  PostgreSQL, 2 processes vs 1: {scaling:.2f}x (aim {TWO_PROCESSES_AIM}x: "
        f"{'met' if scaling >= TWO_PROCESSES_AIM else 'NOT met'}); {load()}"
    )
    return scores


async def clients() -> dict[tuple[str, int], float]:
    """PostgreSQL's score, 1 and 2 API processes, with each client; 2 against 1 by client."""
    if not wrk_available():
        raise SystemExit(WRK_HOW)
    print(
        f"served score on PostgreSQL, 1 and 2 API processes, by client ({CONNECTIONS} "
        f"keep-alive connections; CPU a part of the machine's cores over the rounds; {load()}):"
    )
    rates: dict[tuple[str, int], float] = {}
    for client in ("python", "wrk"):
        for processes in (1, 2):
            url = postgres.test_server_url()  # a fresh database: the server adds its user
            cpu: dict[str, float] = {}
            shares: dict[str, Shares] = {}
            splits: dict[str, list[list[int]]] = {}
            figures = await served(
                url,
                processes,
                only=("bare", "score"),
                cpu=cpu,
                client=client,
                shares=shares,
                database_processes=postgres.server_processes,
                splits=splits,
            )
            rates[client, processes] = figures["score"][0]
            print(
                f"  {client:<6} {processes} process{'es' if processes > 1 else '  '}  "
                f"bare {figures['bare'][0]:>7,.0f}/s  score {figures['score'][0]:>7,.0f}/s  "
                f"({figures['score'][0] / figures['bare'][0]:.2f}x bare; API CPU a score "
                f"{cpu['score']:,.0f} µs); score's CPU: {shares_line(shares['score'])}"
            )
            if processes > 1:
                print(f"    connections by process, score rounds: {split_line(splits['score'])}")
        scaling = rates[client, 2] / rates[client, 1]
        print(
            f"  {client}: 2 processes vs 1: {scaling:.2f}x (aim {TWO_PROCESSES_AIM}x: "
            f"{'met' if scaling >= TWO_PROCESSES_AIM else 'NOT met'})"
        )
    print(f"  {load()}")
    return rates


if __name__ == "__main__":
    asyncio.run(clients() if sys.argv[1:] == ["clients"] else main())
