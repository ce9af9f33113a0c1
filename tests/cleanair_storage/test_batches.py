"""`Batches`: calls made while a batch runs go together in the next, one run for all."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.errors import StoreUnavailable
from cleanair_storage.postgres.batches import Batches


class Doubling:
    """Answers each argument with its double, noting every batch it was given."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def __call__(self, arguments: Sequence[int]) -> list[int]:
        self.batches.append(list(arguments))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise StoreUnavailable()
        return [2 * a for a in arguments]


@given(st.lists(st.integers(), min_size=1, max_size=30))
def test_every_call_gets_its_own_answer_and_calls_go_together(arguments: list[int]) -> None:
    run = Doubling()
    batches = Batches(run)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(batches.call(a) for a in arguments)))

    assert asyncio.run(main()) == [2 * a for a in arguments]
    assert run.batches == [arguments]  # made in one turn of the loop: one batch


def test_calls_made_while_a_batch_runs_go_in_the_next() -> None:
    run = Doubling()
    batches = Batches(run)

    async def main() -> list[int]:
        run.gate = asyncio.Event()
        first = asyncio.create_task(batches.call(1))
        await asyncio.sleep(0)  # a yield: the first batch runs, held at the gate
        later = [asyncio.create_task(batches.call(a)) for a in (2, 3, 4)]
        await asyncio.sleep(0)
        run.gate.set()
        return list(await asyncio.gather(first, *later))

    assert asyncio.run(main()) == [2, 4, 6, 8]
    assert run.batches == [[1], [2, 3, 4]]


def test_a_call_cancelled_before_its_batch_is_left_out() -> None:
    run = Doubling()
    batches = Batches(run)

    async def main() -> int:
        run.gate = asyncio.Event()
        first = asyncio.create_task(batches.call(1))
        await asyncio.sleep(0)  # a yield: the first batch runs, held at the gate
        gone = asyncio.create_task(batches.call(2))
        kept = asyncio.create_task(batches.call(3))
        await asyncio.sleep(0)
        gone.cancel()
        run.gate.set()
        await first
        return await kept

    assert asyncio.run(main()) == 6
    assert run.batches == [[1], [3]]


def test_a_failed_batch_fails_each_of_its_calls_and_the_next_batch_runs() -> None:
    run = Doubling()
    batches = Batches(run)
    run.fail = True

    async def main() -> list[object]:
        return list(
            await asyncio.gather(*(batches.call(a) for a in range(3)), return_exceptions=True)
        )

    assert all(isinstance(r, StoreUnavailable) for r in asyncio.run(main()))
    run.fail = False
    assert asyncio.run(main()) == [0, 2, 4]
    run.fail = True
    with pytest.raises(StoreUnavailable):
        asyncio.run(batches.call(1))
