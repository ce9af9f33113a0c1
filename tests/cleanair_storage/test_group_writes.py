"""SQLite's group writer with `synchronous=FULL`: a batch's statements on the event loop, its
COMMIT (the sync) on the committer thread; nobody answered before that COMMIT returned, the
writes that arrive meanwhile the next batch, one loop wake-up a batch, and no write (nor a
COMMIT) that fails, whatever it raises, leaves the thread dead or a caller waiting."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cleanair_core.errors import StoreUnavailable
from cleanair_storage.sqlite import SqliteStore
from cleanair_storage.sqlite.group_writes import GROUP_WRITER_THREAD, GroupWriter

#: Generous: the machine is shared and loaded.
DEADLINE = 60


class Fatal(BaseException):
    """Not an Exception: what a KeyboardInterrupt or SystemExit would look like to a write."""


class CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts its wake-ups from other threads (its self-pipe writes)."""

    wakeups = 0

    def _write_to_self(self) -> None:
        self.wakeups += 1
        super()._write_to_self()  # type: ignore[misc]  # asyncio's private self-pipe write


def run(main: Callable[[], Any]) -> tuple[Any, int]:
    """`main()` run on a counting loop; its result and the loop's wake-ups."""
    with asyncio.Runner(loop_factory=CountingLoop) as runner:
        result = runner.run(main())
        loop = runner.get_loop()
        assert isinstance(loop, CountingLoop)
        return result, loop.wakeups


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(tmp_path / "cleanair.db")  # synchronous=FULL, the default
    yield store
    store.close()


def writes_of(store: SqliteStore) -> Callable[[Callable[[], Any]], Any]:
    writes = store.group_writes()
    assert writes is not None
    return writes


class HeldCommit:
    """Holds the committer's next COMMIT until released; records what ran in which order."""

    def __init__(self, writer: GroupWriter) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.events: list[str] = []
        self.fail_with: BaseException | None = None
        unit = writer._unit
        real_end = unit.end

        def end(commit: bool) -> None:
            assert threading.current_thread().name == GROUP_WRITER_THREAD
            self.started.set()
            assert self.release.wait(DEADLINE)
            failure, self.fail_with = self.fail_with, None
            if failure is not None:
                real_end(False)
                self.events.append("commit failed")
                raise failure
            real_end(commit)
            self.events.append("commit returned")

        object.__setattr__(unit, "end", end)  # a frozen attrs class: the test's own swap


async def started(held: HeldCommit) -> None:
    await asyncio.to_thread(lambda: held.started.wait(DEADLINE))


def test_writes_arriving_during_a_commit_form_the_next_batch_and_wait_for_its_sync(
    store: SqliteStore,
) -> None:
    writer = store._group_writer
    held = HeldCommit(writer)
    writes = writes_of(store)

    async def main() -> tuple[list[int], int]:
        first = asyncio.ensure_future(writes(lambda: store.hit("first", 0)))
        await started(held)  # its COMMIT is in flight on the committer thread
        later = [asyncio.ensure_future(writes(lambda: store.hit("later", 0))) for _ in range(20)]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        # Nobody is answered before the sync: not the first, nor those queued behind it.
        assert not first.done()
        assert not any(f.done() for f in later)
        held.events.append("released")
        held.started.clear()
        held.release.set()
        counts = await asyncio.gather(first, *later)
        held.events.append("answered")
        return counts, writer.batches

    (counts, batches), wakeups = run(main)
    assert counts == [1, *range(1, 21)]
    # One batch for the first, one for all twenty that came during its COMMIT; each batch
    # wakes the loop once (its COMMIT returned) and the thread hand-over to_thread of
    # `started` once more.
    assert batches == 2
    assert writer.waited_in_thread == 0
    assert wakeups <= batches + 1
    assert held.events == ["released", "commit returned", "commit returned", "answered"]


def test_a_failed_commit_fails_every_caller_of_its_batch_and_keeps_nothing(
    store: SqliteStore,
) -> None:
    held = HeldCommit(store._group_writer)
    held.fail_with = StoreUnavailable()
    held.release.set()
    writes = writes_of(store)

    async def main() -> list[object]:
        with store._write_lock:  # all three queue for one batch
            queued = [asyncio.ensure_future(writes(lambda: store.hit("lost", 0))) for _ in range(3)]
            await asyncio.sleep(0)
        return list(await asyncio.gather(*queued, return_exceptions=True))

    outcomes, _ = run(main)
    assert all(isinstance(o, StoreUnavailable) for o in outcomes)
    assert held.events == ["commit failed"]
    assert store.hit("lost", 0) == 1  # nothing of the failed batch was kept
    assert store._write_lock.acquire(blocking=False)  # and the lock went with it
    store._write_lock.release()


def test_a_write_raising_a_base_exception_fails_alone_and_the_writer_goes_on(
    store: SqliteStore,
) -> None:
    writes = writes_of(store)

    def fatal() -> int:
        store.hit("doomed", 0)
        raise Fatal()

    async def main() -> tuple[list[object], int]:
        with store._write_lock:
            queued = [
                asyncio.ensure_future(writes(lambda: store.hit("kept", 0))),
                asyncio.ensure_future(writes(fatal)),
                asyncio.ensure_future(writes(lambda: store.hit("kept", 0))),
            ]
            await asyncio.sleep(0)
        outcomes = await asyncio.gather(*queued, return_exceptions=True)
        return outcomes, await writes(lambda: store.hit("after", 0))

    (outcomes, after), _ = run(main)
    assert outcomes[0] == 1
    assert outcomes[2] == 2
    assert isinstance(outcomes[1], Fatal)
    assert after == 1
    assert store.hit("doomed", 0) == 1  # undone alone


def test_a_commit_raising_a_base_exception_leaves_the_committer_alive(
    store: SqliteStore,
) -> None:
    held = HeldCommit(store._group_writer)
    held.fail_with = Fatal()
    held.release.set()
    writes = writes_of(store)

    async def main() -> tuple[object, int]:
        failed = await asyncio.gather(writes(lambda: store.hit("k", 0)), return_exceptions=True)
        return failed[0], await writes(lambda: store.hit("k", 0))

    (failed, count), _ = run(main)
    assert isinstance(failed, Fatal)
    assert count == 1  # the thread took the next COMMIT; the failed one kept nothing
    assert held.events == ["commit failed", "commit returned"]


def test_a_batch_that_finds_the_lock_held_waits_for_it_in_a_thread_and_survives_fatal_writes(
    store: SqliteStore,
) -> None:
    writer = store._group_writer
    writes = writes_of(store)
    holder_has_lock = threading.Event()
    let_go = threading.Event()

    def hold_lock() -> None:
        with store.transaction():
            holder_has_lock.set()
            assert let_go.wait(DEADLINE)

    def fatal() -> int:
        store.hit("doomed", 0)
        raise Fatal()

    async def main() -> list[object]:
        holder = threading.Thread(target=hold_lock)
        holder.start()
        await asyncio.to_thread(lambda: holder_has_lock.wait(DEADLINE))
        queued = [
            asyncio.ensure_future(writes(fatal)),
            asyncio.ensure_future(writes(lambda: store.hit("kept", 0))),
        ]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not any(f.done() for f in queued)  # nothing waited on the loop meanwhile
        let_go.set()
        outcomes = await asyncio.gather(*queued, return_exceptions=True)
        holder.join(DEADLINE)
        return outcomes

    outcomes, _ = run(main)
    assert isinstance(outcomes[0], Fatal)
    assert outcomes[1] == 1
    assert writer.waited_in_thread == 1
    assert store.hit("doomed", 0) == 1


def traced_statements(store: SqliteStore) -> list[str]:
    """The statements the writer connection runs from now on, as SQLite traces them."""
    statements: list[str] = []
    store._writer.set_trace_callback(statements.append)
    return statements


def test_a_batch_of_one_write_runs_no_savepoint(store: SqliteStore) -> None:
    """A request's group commit reaches the writer as one write: its transaction is its own,
    so it needs no savepoint (two statements more, and a sub-journal SQLite wrote to a temp
    file on the event loop once a batch's pages passed 64 KiB)."""
    writes = writes_of(store)

    async def main() -> int:
        await writes(lambda: store.hit("first", 0))  # sets the writer's busy timeout once
        statements = traced_statements(store)
        count: int = await writes(lambda: store.hit("alone", 0))
        store._writer.set_trace_callback(None)
        assert statements[0] == "BEGIN IMMEDIATE"
        assert statements[-1] == "COMMIT"
        assert not [s for s in statements if "SAVEPOINT" in s.upper()]
        assert len(statements) == 3  # BEGIN, the hit's one upsert, COMMIT
        return count

    count, _ = run(main)
    assert count == 1


@pytest.mark.parametrize("raised", [ValueError("bad"), Fatal()], ids=["exception", "base"])
def test_a_batch_of_one_write_that_fails_keeps_nothing_and_the_writer_goes_on(
    store: SqliteStore, raised: BaseException
) -> None:
    writes = writes_of(store)

    def failing() -> int:
        store.hit("doomed", 0)
        raise raised

    async def main() -> tuple[object, int]:
        failed = await asyncio.gather(writes(failing), return_exceptions=True)
        return failed[0], await writes(lambda: store.hit("after", 0))

    (failed, after), _ = run(main)
    assert failed is raised
    assert after == 1
    assert store.hit("doomed", 0) == 1  # rolled back with its transaction
    assert store._write_lock.acquire(blocking=False)  # and the lock went with it
    store._write_lock.release()
    assert store._group_writer.batches == 2
