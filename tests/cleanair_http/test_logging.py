"""The JSON log lines: no terminal escapes, and the access log at its own level."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from cleanair_core import CleanAir
from cleanair_http.access_log import configure_logging
from support.http import MakeClient, bearer, pair


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """`configure_logging` sets the process's loggers: put them back for the other tests."""
    root, access = logging.getLogger(), logging.getLogger("cleanair.access")
    handlers, level, access_level = root.handlers[:], root.level, access.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        access.setLevel(access_level)


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
    err = capsys.readouterr().err
    assert "\x1b[" not in err
    assert "\\u001b[" not in err
    assert "color_message" not in err
    (line,) = lines(err)
    assert line["message"] == "Started server process [4242]"
    assert line["logger"] == "uvicorn.error"


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
    written = lines(capsys.readouterr().err)
    assert [line["path"] for line in written if line["logger"] == "cleanair.access"] == logged
    assert all(line["logger"] == "cleanair.access" for line in written)
