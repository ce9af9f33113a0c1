"""The JSON log lines: no terminal escapes, and the access log at its own level."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core import CleanAir
from cleanair_runtime.logs import configure_logging, flush_logs, stop_logging
from support.http import MakeClient, bearer, pair


def lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines()]


@pytest.mark.usefixtures("restored_logging")
def test_uvicorns_colour_copy_of_a_message_is_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO")
    # As uvicorn logs it, with a copy of the message for its console formatter.
    logging.getLogger("uvicorn.error").info(
        "Started server process [%d]",
        4242,
        extra={"color_message": "Started server process [\x1b[36m%d\x1b[0m]"},
    )
    flush_logs()
    err = capsys.readouterr().err
    assert "\x1b[" not in err
    assert "\\u001b[" not in err
    assert "color_message" not in err
    (line,) = lines(err)
    assert line["message"] == "Started server process [4242]"


@pytest.mark.usefixtures("restored_logging")
def test_uvicorns_start_and_stop_lines_are_the_servers_not_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("INFO")
    configure_logging("INFO")  # configured again (a forked process, say): still one name
    server = logging.getLogger("uvicorn.error")
    for message in ("Started server process [4242]", "Application shutdown complete."):
        server.info(message)
    flush_logs()
    written = lines(capsys.readouterr().err)
    assert [line["message"] for line in written] == [
        "Started server process [4242]",
        "Application shutdown complete.",
    ]
    assert {line["logger"] for line in written} == {"cleanair.server"}


@pytest.mark.parametrize(
    ("access_log", "logged"),
    [
        ("info", ["/v1/connections/token", "/v1/quota"]),
        ("debug", ["/v1/connections/token", "/v1/quota", "/livez"]),
        ("off", []),
    ],
)
@pytest.mark.usefixtures("restored_logging")
def test_the_access_log_has_its_own_level_whatever_the_log_level(
    core: CleanAir,
    make_client: MakeClient,
    capsys: pytest.CaptureFixture[str],
    access_log: str,
    logged: list[str],
) -> None:
    configure_logging("WARNING", access_log)
    client = make_client(access_log=True)
    token = pair(core, client)
    assert client.get("/v1/quota", headers=bearer(token)).status_code == 200
    assert client.get("/livez").status_code == 200
    logging.getLogger("cleanair").info("not at WARNING")
    flush_logs()
    written = lines(capsys.readouterr().err)
    assert [line["path"] for line in written if line["logger"] == "cleanair.access"] == logged
    assert all(line["logger"] == "cleanair.access" for line in written)


class Recording(io.StringIO):
    """A stream that notes which threads write to it."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: set[int] = set()

    def write(self, text: str) -> int:
        self.writers.add(threading.get_ident())
        return super().write(text)


@pytest.mark.usefixtures("restored_logging")
def test_lines_are_written_by_a_thread_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Formatting and writing a line is off the path of whoever logs it (a request)."""
    stream = Recording()
    monkeypatch.setattr("sys.stderr", stream)
    configure_logging("INFO")
    logging.getLogger("cleanair.access").info("request", extra={"path": "/v1/quota"})
    assert threading.get_ident() not in stream.writers
    stop_logging()  # the writer thread writes what it was handed, then ends
    assert [line["path"] for line in lines(stream.getvalue())] == ["/v1/quota"]
    assert stream.writers
    assert threading.get_ident() not in stream.writers


@settings(max_examples=10, deadline=None)
@given(per_thread=st.lists(st.integers(0, 300), min_size=1, max_size=4))
def test_a_clean_stop_writes_every_line_in_the_order_each_thread_logged_it(
    per_thread: list[int],
) -> None:
    stream = Recording()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        with contextlib.redirect_stderr(stream):
            configure_logging("INFO")
        logger = logging.getLogger("cleanair.test")

        def log(thread: int, count: int) -> None:
            for n in range(count):
                logger.info("line", extra={"logger_thread": thread, "n": n})

        threads = [
            threading.Thread(target=log, args=(thread, count))
            for thread, count in enumerate(per_thread)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stop_logging()
    finally:
        stop_logging()
        root.handlers[:] = handlers
        root.setLevel(level)
    written = lines(stream.getvalue())
    assert len(written) == sum(per_thread)
    for index, count in enumerate(per_thread):
        in_order = [line["n"] for line in written if line["logger_thread"] == index]
        assert in_order == list(range(count))


@pytest.mark.usefixtures("restored_logging")
def test_lines_logged_after_a_stop_are_written_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = Recording()
    monkeypatch.setattr("sys.stderr", stream)
    configure_logging("INFO")
    stop_logging()
    logging.getLogger("cleanair").warning("after the stop")
    assert [line["message"] for line in lines(stream.getvalue())] == ["after the stop"]


@pytest.mark.usefixtures("restored_logging")
def test_a_traceback_is_written_as_it_was_when_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = Recording()
    monkeypatch.setattr("sys.stderr", stream)
    configure_logging("INFO")
    values = ["as logged"]
    try:
        raise ValueError(values)
    except ValueError:
        logging.getLogger("cleanair").exception("failed with %s", values)
    values[0] = "changed later"
    flush_logs()
    (line,) = lines(stream.getvalue())
    assert line["message"] == "failed with ['as logged']"
    assert isinstance(line["exception"], str)
    assert "ValueError" in line["exception"]


@pytest.mark.usefixtures("restored_logging")
def test_a_forked_process_writes_its_lines_and_its_parent_goes_on(tmp_path: Path) -> None:
    """`cleanair serve --workers N` forks its serving processes after logging is set up: a
    fork copies no writer thread, so each process must start its own."""
    path = tmp_path / "log"
    logger = logging.getLogger("cleanair")
    with path.open("w") as file, contextlib.redirect_stderr(file):
        configure_logging("INFO")
        logger.info("before the fork")
        pid = os.fork()
        if pid == 0:  # the child: its line, written before it ends without atexit
            status = 1
            try:
                logger.info("in the child")
                stop_logging()
                status = 0
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        logger.info("in the parent")
        stop_logging()
    written = [line["message"] for line in lines(path.read_text())]
    assert written == ["before the fork", "in the child", "in the parent"]


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, under which a file is created readable by everyone unless asked."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


@pytest.mark.usefixtures("restored_logging", "umask_022")
def test_a_log_file_is_created_for_its_owner_alone(tmp_path: Path) -> None:
    path = tmp_path / "debug.log"
    configure_logging("DEBUG", file=path)
    logging.getLogger("cleanair").debug("to the file")
    flush_logs()
    configure_logging("DEBUG", file=path)  # configured again (a plan process, say): appended
    logging.getLogger("cleanair").debug("and again")
    stop_logging()
    assert path.stat().st_mode & 0o777 == 0o600
    assert [line["message"] for line in lines(path.read_text())] == ["to the file", "and again"]
    configure_logging("INFO")  # back to stderr, closing the file


@pytest.mark.usefixtures("restored_logging", "umask_022")
def test_an_existing_log_file_others_may_read_loses_that_access(tmp_path: Path) -> None:
    path = tmp_path / "cleanair.log"
    path.write_text("")
    path.chmod(0o644)
    configure_logging("INFO", file=path)
    stop_logging()
    assert path.stat().st_mode & 0o777 == 0o640  # its group's (a log shipper's) is left
    configure_logging("INFO")


@pytest.mark.usefixtures("restored_logging", "umask_022")
def test_a_log_file_that_is_not_a_regular_file_keeps_its_mode(tmp_path: Path) -> None:
    # As /dev/null does: a device or FIFO others write to must stay writable by them.
    path = tmp_path / "log.fifo"
    os.mkfifo(path, 0o666)
    path.chmod(0o666)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # so opening to write does not wait
    try:
        configure_logging("INFO", file=path)
        stop_logging()
        assert path.stat().st_mode & 0o777 == 0o666
    finally:
        os.close(reader)
        configure_logging("INFO")
