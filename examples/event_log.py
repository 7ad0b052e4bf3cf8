"""A few hundred session events into an embedded SQLite log, read back after reopening it."""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter
from pathlib import Path

from events import (
    NO_STREAM,
    SessionCreated,
    SessionDeleted,
    SessionInfoChanged,
    SessionUpdated,
    TitleSource,
    open_store,
)
from events.verify import verify_log


def main() -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite://{Path(folder) / 'sessions.db'}"
        print(f"store: {url}")
        now = time.time_ns()
        with open_store(url) as store:
            for n in range(60):
                session = f"sess_{n:03d}"
                store.append(session, [SessionCreated(cwd=f"/work/project-{n % 4}", at=now + n)], NO_STREAM)
                for turn in range(rng.randint(1, 6)):
                    store.append(session, [SessionUpdated(at=now + n + turn, messages=2)])
                if n % 3 == 0:
                    store.append(session, [SessionInfoChanged(title=f"Task {n}", title_source=TitleSource.AGENT)])
                if n % 10 == 9:
                    store.append(session, [SessionInfoChanged(title=None)])  # an explicit clear
                if n % 15 == 14:
                    store.append(session, [SessionDeleted()])
            written = store.head()
        print(f"appended {written} events; reopening the file")
        with open_store(url) as store:
            log = store.read()
            kinds = Counter(type(r.event).__name__ for r in log)
            report = verify_log(store)
        for kind, count in sorted(kinds.items()):
            print(f"  {kind:<20} {count:>4}")
        for record in log[:3] + log[-3:]:
            print(f"  #{record.position:<4} {record.session_id} v{record.version}  {record.event!r}")
        state = "healthy" if report.healthy else f"{len(report.problems)} problems"
        print(f"read {len(log)} events of {report.sessions} sessions back; head {report.head}; log {state}")


if __name__ == "__main__":
    main()
