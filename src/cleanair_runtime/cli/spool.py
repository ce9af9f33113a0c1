"""A temporary file that holds parsed values between reading input and writing it.

`cleanair stations import` reads and checks every file before it opens its one write
transaction, so the database's write lock (which every API process sharing a SQLite file
waits on for its own writes) is held only while the checked values are written, not while
gzip files are read and parsed. The values wait here, on disk, so memory stays flat.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, Generic, TypeVar

T = TypeVar("T")

#: Values pickled together: fewer, larger pickles are faster to write and read back.
SPOOL_BATCH = 2_000


class Spool(Generic[T]):
    """Values written once, read back in order; the file is deleted when it closes. Only
    this process's own values are read back (pickle trusts what it reads)."""

    def __init__(self) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self._batch: list[T] = []
        self.count = 0

    def __enter__(self) -> Spool[T]:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def extend(self, values: Iterable[T]) -> None:
        """Append `values`, a batch at a time."""
        for value in values:
            self._batch.append(value)
            self.count += 1
            if len(self._batch) >= SPOOL_BATCH:
                self._flush()
        self._flush()

    def _flush(self) -> None:
        if self._batch:
            pickle.dump(self._batch, self._file, protocol=pickle.HIGHEST_PROTOCOL)
            self._batch = []

    def __iter__(self) -> Iterator[T]:
        """Every value appended, in order (from the start each time)."""
        self._flush()
        self._file.flush()
        self._file.seek(0)
        while True:
            try:
                batch: list[T] = pickle.load(self._file)  # noqa: S301 - our own file
            except EOFError:
                return
            yield from batch
