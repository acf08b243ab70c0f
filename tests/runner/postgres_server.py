"""A throwaway PostgreSQL server for the store tests: initdb into a temp dir, pg_ctl start on a free loopback port.

The server binaries come from the machine (Debian's ``postgresql`` package, which ``.ci/run`` installs when
missing): on PATH, else under ``/usr/lib/postgresql/<version>/bin``. PostgreSQL refuses to run as root, so as root
every server command runs as the ``postgres`` user (``runuser``), in a temp dir that user owns. Authentication is
``trust`` on 127.0.0.1 only, and the unix socket lives in the temp dir: nothing outside this process can see it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "evaltrace"
_READY_TIMEOUT_S = 60


class ServerUnavailable(Exception):
    """No PostgreSQL server can be started here; the message says why."""


def _bin_dir() -> Path:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if versions:
        return Path(versions[-1]).parent
    raise ServerUnavailable("no PostgreSQL server binaries (initdb) on PATH or in /usr/lib/postgresql/*/bin")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server; :meth:`stop` shuts it down and removes its files."""

    root: Path
    port: int
    bin_dir: Path
    run_as: list[str]

    @property
    def dsn(self) -> str:
        """DSN of the server's ``postgres`` database as the superuser."""
        return self.dsn_for("postgres")

    def dsn_for(self, database: str) -> str:
        """DSN of one database."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        command = [*self.run_as, str(self.bin_dir / args[0]), *args[1:]]
        done = subprocess.run(command, capture_output=True, text=True, timeout=_READY_TIMEOUT_S, check=False)
        if done.returncode != 0:
            log = (self.root / "server.log").read_text(errors="replace")[-2000:] if self.root.exists() else ""
            raise ServerUnavailable(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}\n{log}")

    @classmethod
    def start(cls) -> PostgresServer:
        """initdb and start a server; raise ServerUnavailable (with the reason) when it cannot run."""
        bin_dir = _bin_dir()
        run_as: list[str] = []
        root = Path(tempfile.mkdtemp(prefix="evaltrace-pg-"))
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                shutil.rmtree(root, ignore_errors=True)
                raise ServerUnavailable("running as root and there is no 'postgres' user to run the server") from None
            runuser = shutil.which("runuser")
            if runuser is None:
                shutil.rmtree(root, ignore_errors=True)
                raise ServerUnavailable("running as root and runuser is missing")
            os.chown(root, user.pw_uid, user.pw_gid)
            run_as = [runuser, "-u", "postgres", "--"]
        server = cls(root=root, port=_free_port(), bin_dir=bin_dir, run_as=run_as)
        try:
            server._run("initdb", "-D", str(root / "data"), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync")
            options = f"-h 127.0.0.1 -p {server.port} -k {root} -F -c fsync=off -c full_page_writes=off"
            server._run(
                "pg_ctl", "-D", str(root / "data"), "-l", str(root / "server.log"), "-o", options, "-w", "start"
            )
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        server._wait_ready()
        return server

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + _READY_TIMEOUT_S
        while True:
            try:
                psycopg.connect(self.dsn, connect_timeout=2).close()
                return
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerUnavailable(f"server on port {self.port} never accepted connections: {exc}") from None
                time.sleep(0.2)

    def pids(self) -> list[int]:
        """The postmaster's pid, then every process it started (backends, checkpointer, walwriter, ...)."""
        postmaster = int((self.root / "data" / "postmaster.pid").read_text().split()[0])
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                # Fields after the command (which may hold spaces) begin after its closing parenthesis.
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # a process that exited meanwhile
            if int(fields[1]) == postmaster:
                children.append(int(stat.parent.name))
        return [postmaster, *children]

    @contextmanager
    def frozen(self) -> Iterator[list[int]]:
        """SIGSTOP the whole server (postmaster first, so it starts no one new), SIGCONT it on exit, whatever happens.

        Stopping the postmaster alone freezes nothing already connected: its backends answer on their own.
        The kernel still completes TCP handshakes and acknowledges data, as with a hung host or VM.
        """
        stopped: list[int] = []
        try:
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                stopped.append(pid)
            yield stopped
        finally:
            for pid in stopped:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass

    def create_database(self, name: str) -> str:
        """Create an empty database; return its DSN."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn_for(name)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its files."""
        try:
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
