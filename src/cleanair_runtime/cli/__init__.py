"""`cleanair`: the operator CLI. It works on the same database as a running server."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cleanair_core.errors import OperatorError, StoreUnavailable
from cleanair_runtime.cli.commands import run
from cleanair_runtime.cli.parser import build_parser
from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings, SettingsError
from cleanair_runtime.terminal import escape_nonprintable, quiet_on_closed_pipe
from cleanair_storage.errors import SchemaTooNew

#: The commands that may make a new SQLite database and key file (saying so on stderr): what
#: an operator runs first on a new machine. Every other command refuses when there is none:
#: run from another folder, the relative default `./var/cleanair.db` would otherwise be a
#: second, empty database with its own key, whose pairing codes the server answers with 401.
#: Not `worker`: a worker on a new, empty database would idle for ever, claiming none of the
#: API's plans.
CREATING = frozenset(
    {
        "serve",
        "users add",
        "partners add",
        "clients add",
        "wifi import",
        "network import",
        "stations import",
    }
)


def _command(args: argparse.Namespace) -> str:
    action = getattr(args, "action", None)
    return str(args.command) if action is None else f"{args.command} {action}"


def _check_database(settings: Settings, command: str) -> None:
    """Refuse (SettingsError) a command outside `CREATING` when the SQLite database or its
    key file does not exist; for one in `CREATING`, say on stderr what it is about to create,
    by absolute path, and make the folders for it."""
    if settings.uses_postgres or str(settings.database) == ":memory:":
        return
    given = Path(settings.database)
    database = given.absolute()
    key_file = None if settings.secret_key else settings.key_file.absolute()
    missing = [f"database {database}"] if not database.exists() else []
    if key_file is not None and not key_file.exists():
        missing.append(f"key file {key_file}")
    if database.is_dir():
        raise SettingsError(f"CLEANAIR_DATABASE: {database} is a folder, not a database file")
    if not missing:
        return
    if key_file is not None:
        from cleanair_runtime.composition.bootstrap import key_is_lost, lost_key

        if key_is_lost(database, key_file):
            raise lost_key(key_file)
    where = "" if given.is_absolute() else f" (CLEANAIR_DATABASE is relative to {Path.cwd()})"
    if command not in CREATING:
        raise SettingsError(
            f"no database at {database}{where}: run cleanair where its database is or set "
            "CLEANAIR_DATABASE (`cleanair users add` or `cleanair serve` makes a new one)"
        )
    for folder in {database.parent, *([] if key_file is None else [key_file.parent])}:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SettingsError(
                f"cannot create the folder {folder}: {exc.strerror or exc}"
            ) from None
    print(f"cleanair: creating a new {' and '.join(missing)}{where}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` (default: the process's arguments); its exit status. Output cut
    short by its reader (`| head`) ends the command quietly with 141 (`quiet_on_closed_pipe`)."""
    return quiet_on_closed_pipe(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        if args.command == "serve":
            from cleanair_runtime.processes.server import serve

            # Checked (and the database's folder made) once the port is bound: a busy port
            # fails before anything is created.
            return serve(
                settings,
                args.host,
                args.port,
                args.workers,
                prepare=lambda: _check_database(settings, "serve"),
            )
        _check_database(settings, _command(args))
        if args.command == "worker":
            from cleanair_runtime.processes.worker import work

            return work(settings, args.concurrency)
        # Evaluating asks the air-quality source; every other command works on the store.
        evaluating = _command(args) == "stations evaluate"
        deployment = open_deployment(settings, with_sources=evaluating)
    except SettingsError as exc:
        # One bad setting per line: those line breaks are the CLI's own, the rest is escaped.
        lines = (escape_nonprintable(line) for line in str(exc).split("\n"))
        print("cleanair: " + "\n".join(lines), file=sys.stderr)
        return 2
    except SchemaTooNew as exc:
        # Not worth a retry, unlike 3: this release must not run on this database at all.
        # The message may name migrations the database recorded: escaped.
        print(f"cleanair: {escape_nonprintable(exc)}", file=sys.stderr)
        return 2
    except StoreUnavailable as exc:
        return _unavailable(exc)
    except OSError as exc:  # a file the settings name that cannot be made or opened
        where = f"{exc.filename}: " if exc.filename else ""
        print(
            f"cleanair: {escape_nonprintable(where + (exc.strerror or str(exc)))}", file=sys.stderr
        )
        return 2
    try:
        status = run(deployment.core, args)
    except (OperatorError, ValueError) as exc:
        # Messages embed arguments and stored names ("no user ...", "no such file: ...").
        print(f"cleanair: {escape_nonprintable(exc)}", file=sys.stderr)
        return 1
    except StoreUnavailable as exc:
        return _unavailable(exc)
    finally:
        deployment.close()
    return status


def _unavailable(exc: StoreUnavailable) -> int:
    """The database is busy past its timeout, full or failing: worth a retry, so exit 3."""
    print(f"cleanair: {exc.detail}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
