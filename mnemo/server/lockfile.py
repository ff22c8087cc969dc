"""One server per store folder: `mnemo serve` holds a lock file in its --store-dir while it runs.

Tenant stores open lazily, on a tenant's first request. Without this, a second server
started on the same folder (by mistake, or a health-checked duplicate) opened the tenant
files the first had not opened yet and took them: the live server then answered 503 for
those tenants. Now the second refuses to start, naming the pid that serves the folder.

The lock is `flock` on `<store_dir>/.mnemo-server.lock`, which also holds the owner's pid
and start time for the message. The kernel releases it when its process dies, however it
dies (kill -9 included), so a file left by a dead server is stale by construction and the
next server takes it over. A postgresql:// store_dir has no folder: replicas over one
database are the intended use there (`tenants`), so nothing is locked.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreLocked
from ..store import is_dsn

NAME = ".mnemo-server.lock"


def owner(path: Path) -> dict:
    """Return what the lock file says of the server that wrote it ({} if unreadable)."""
    try:
        found = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


@contextmanager
def serving(store_dir: str | Path | None) -> Iterator[Path | None]:
    """Hold the store folder for this process while the block runs; StoreLocked if another server holds it.

    Yields the lock file's path (None when there is nothing to lock: no folder, or a DSN).
    """
    if store_dir is None or is_dsn(str(store_dir)):
        yield None
        return
    path = Path(store_dir) / NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held = owner(path)
            pid = f" (pid {held['pid']} on {held.get('host', '?')})" if "pid" in held else ""
            raise StoreLocked(f"{store_dir} is served by another mnemo server{pid}; two servers on one folder "
                              "would take each other's tenant stores. Stop that server first, or give this one "
                              "another --store-dir.") from None
        # Ours now: whatever an earlier (dead) owner wrote is replaced.
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode())
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
