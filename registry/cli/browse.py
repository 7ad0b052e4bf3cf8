"""``list``, ``show`` and ``history``: the registry as a client sees it, and a session's events."""

from __future__ import annotations

import argparse
import os

from msgspec import UNSET

from events.codec import encode_record_json
from events.model import SessionCreated
from registry.cli.errors import InputError
from registry.cli.stores import StoreLocation, locate, open_log, open_registry
from registry.cli.terminal import stdout_console, write_json, write_json_line
from registry.cli.views import describe_event, session_table, sessions_table
from registry.model import SessionInfo, format_time, session_info
from registry.paths import normalise_cwd
from registry.projection import fold

__all__ = ["cwd_option", "history", "list_sessions", "show"]


def cwd_option(value: str | None) -> str | None:
    """``--cwd`` as the registry keeps cwds; a relative one is taken from the current directory."""
    return None if value is None else normalise_cwd(os.path.abspath(value), field="--cwd")


def list_sessions(args: argparse.Namespace) -> int:
    location = locate(args.store)
    cwd = cwd_option(args.cwd)
    with open_registry(location, create=False, follow=False, page_size=args.page_size) as registry:
        page = registry.list(cwd=cwd, cursor=args.cursor)
        pages = [page.sessions]
        while args.all and page.next_cursor is not UNSET:
            page = registry.list(cwd=cwd, cursor=page.next_cursor)
            pages.append(page.sessions)
    if args.json:
        write_json([info for p in pages for info in p] if args.all else page)
        return 0
    console = stdout_console()
    count = sum(map(len, pages))
    where = "" if cwd is None else f" in {cwd}"
    console.print(sessions_table(pages, title=f"{count} session{'s' if count != 1 else ''}{where}"))
    if page.next_cursor is not UNSET:
        console.print(
            f"more sessions follow: --all lists every page, or --cursor {page.next_cursor} the next one",
            markup=False,
            soft_wrap=True,
        )
    return 0


def show(args: argparse.Namespace) -> int:
    with open_registry(locate(args.store), create=False, follow=False) as registry:
        state = registry.state(args.session)
        if state is None:
            raise InputError(f"no session {args.session!r} in this store")
        if state.deleted:
            raise InputError(
                f"session {args.session!r} was deleted at position {state.position} "
                f"(acp-registry history {args.session} shows its events)"
            )
        info: SessionInfo = session_info(state, additional_directories=registry.additional_directories)
    if args.json:
        write_json(info)
    else:
        stdout_console().print(session_table(info, state))
    return 0


def history(args: argparse.Namespace) -> int:
    location: StoreLocation = locate(args.store)
    with open_log(location, create=False) as store:
        records = store.read_stream(args.session)
    if not records:
        raise InputError(f"no session {args.session!r} in this store")
    if args.json:
        for record in records:
            write_json_line(encode_record_json(record))
        return 0
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    table = Table(title=f"session {args.session}: {len(records)} events", title_justify="left")
    table.add_column("position", justify="right")
    table.add_column("recorded (UTC)", no_wrap=True)
    table.add_column("version", justify="right")
    table.add_column("event")
    table.add_column("what it changed", overflow="fold")
    state = None
    for record in records:
        after = fold(state, record)
        kind = type(record.event).__name__
        table.add_row(
            str(record.position),
            format_time(record.recorded_at),
            str(record.version),
            Text(kind, style="bold" if isinstance(record.event, SessionCreated) else ""),
            Text(describe_event(record, state, after), style="dim" if after is None else ""),
        )
        state = after or state
    stdout_console().print(table)
    return 0
