"""The tracking store: where it is, one lock for its writers, and the runs its dead writers left.

The store is MLFLOW_TRACKING_URI when set, else the embedded ``sqlite:///mlflow.db`` of the
repository. Every write to it goes through `open_store` (one lock, one code path), so:

- an embedded sqlite store is created whole or not at all: built beside ``mlflow.db`` and renamed
  into place, under the store's lock, so writers started together on a fresh store take turns,
  and a kill, a full disk or a file-size limit during its creation cannot leave a half-made
  schema that breaks every later run (`create_sqlite_store`);
- a tracking server is probed in seconds and MLflow's HTTP retries are bounded, so an outage is
  one `TrackingError` line at once, not minutes of retries;
- a run whose process died (kill -9) is closed KILLED with the tag ``arecall.orphaned`` by the
  next writer on its host (`arecall.tracking.orphans.close_orphans`).

mlflow is imported only inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from arecall.core.errors import ArecallError
from arecall.tracking.orphans import close_orphans

__all__ = [
    "TrackingError",
    "artifact_root",
    "create_experiment",
    "create_sqlite_store",
    "holds_nothing",
    "is_server",
    "open_store",
    "probe",
    "store_lock",
    "tracking_uri",
]

#: Bounded HTTP behaviour for a tracking server (MLflow's defaults retry for minutes).
_HTTP_ENV = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
}
_PROBE_TIMEOUT = 5.0


class TrackingError(ArecallError):
    """The tracking store could not be written (one line; the results are kept)."""


def tracking_uri(root: str | Path = ".") -> str:
    """MLFLOW_TRACKING_URI, or the embedded sqlite store ``mlflow.db`` of the repository.

    The repository is $DVC_ROOT when DVC runs the stage: a queued or ``--temp`` experiment runs
    in a temporary copy under ``.dvc/tmp/exps``, and DVC points DVC_ROOT at the original
    repository, so its run lands in the store the user opens with ``make ui``. Otherwise
    ``root``.

    Examples
    --------
    >>> import os
    >>> for name in ("MLFLOW_TRACKING_URI", "DVC_ROOT"):
    ...     _ = os.environ.pop(name, None)
    >>> tracking_uri("/repo")
    'sqlite:////repo/mlflow.db'
    """
    where = Path(os.environ.get("DVC_ROOT") or root).resolve()
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{where}/mlflow.db"


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialise writers of one embedded sqlite store across processes (a no-op otherwise).

    Parallel sweep jobs (Hydra's joblib launcher) and concurrent commands share ``mlflow.db``;
    sqlite allows one writer at a time, MLflow does not retry a locked database, and its schema
    migration on a fresh file is not safe against a second process. An exclusive ``flock`` on
    ``<db>.lock`` makes them take turns. A tracking server needs no lock.

    Examples
    --------
    >>> import tempfile
    >>> with store_lock(f"sqlite:///{tempfile.mkdtemp()}/mlflow.db"):
    ...     pass
    """
    if not uri.startswith("sqlite:///"):
        yield
        return
    lock_path = Path(uri.removeprefix("sqlite:///") + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def is_server(uri: str) -> bool:
    """Whether ``uri`` is a tracking server (HTTP), not a file store.

    Examples
    --------
    >>> is_server("http://127.0.0.1:5000"), is_server("sqlite:///mlflow.db")
    (True, False)
    """
    return uri.startswith(("http://", "https://"))


def _bound_http() -> None:
    """MLflow's HTTP retries and timeouts for this process, unless the environment sets them."""
    for name, value in _HTTP_ENV.items():
        os.environ.setdefault(name, value)


def probe(uri: str) -> bool:
    """Whether a tracking server answers ``/health`` within a few seconds (True for files)."""
    if not is_server(uri):
        return True
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=_PROBE_TIMEOUT):
            return True
    except urllib.error.HTTPError:
        return True  # it answered: some servers have no /health; the real call will tell
    except (OSError, ValueError):
        return False


# -- creating a sqlite store: whole or not at all ------------------------------------------------

#: Tables a store fresh from MLflow's migrations holds rows in: its schema version, the default
#: workspace. Any row elsewhere is data, and a store with data is never rebuilt.
_BOOKKEEPING = frozenset({"alembic_version", "workspaces"})


def _sqlite_path(uri: str) -> Path | None:
    """The file of a ``sqlite:///`` store (None: a server, an in-memory or parametrised URI)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri.removeprefix("sqlite:///")
    return None if not path or path == ":memory:" or "?" in path else Path(path)


def holds_nothing(path: str | os.PathLike[str]) -> bool:
    """Whether the sqlite store at ``path`` is absent or holds no data (a creation cut short).

    MLflow creates a store by running some forty migrations, each its own transaction: a kill,
    a full disk or a file-size limit in between leaves a schema half made, and every later open
    fails ("table _alembic_tmp_datasets already exists"). Such a file has MLflow's tables (or
    none) and no row but bookkeeping; a store with any experiment, run or other row is data and
    is left alone, and so is a file that is not an MLflow store (sqlite or not).

    Examples
    --------
    >>> import sqlite3, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> holds_nothing(d / "absent.db")
    True
    >>> with sqlite3.connect(d / "other.db") as con:
    ...     _ = con.execute("CREATE TABLE notes (text TEXT)")
    >>> holds_nothing(d / "other.db")
    False
    """
    import sqlite3
    from contextlib import closing

    target = Path(path)
    try:
        if not target.exists() or target.stat().st_size == 0:
            return True
        # a read-write connection: a hot journal left by a killed writer is rolled back first
        with closing(sqlite3.connect(target, timeout=30)) as con:
            tables = {
                name
                for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                if not name.startswith("sqlite_")
            }
            if not tables:
                return True
            if not {"experiments", "alembic_version"} <= tables:
                return False  # not an MLflow store: not ours to judge
            return not any(
                con.execute(f'SELECT 1 FROM "{name}" LIMIT 1').fetchone()
                for name in sorted(tables - _BOOKKEEPING, key=lambda n: n != "experiments")
            )
    except (OSError, sqlite3.Error):
        return False  # MLflow will say what is wrong with it


def create_sqlite_store(path: str | os.PathLike[str]) -> None:
    """Create an MLflow sqlite store at ``path`` whole, or leave ``path`` as it was.

    The store is built beside ``path`` as a temporary file (`arecall.io.atomic.atomic_path`:
    removed if the build fails, and by the next creator if this process is killed), by MLflow's
    own code (its migrations and default experiment), then renamed onto ``path`` in one step. A
    file at ``path`` that `holds_nothing` (a creation cut short before this existed) is replaced
    the same way. Called under the store's lock, so one process creates and the others wait.

    The temporary file is private until the rename, so it is built without a rollback journal or
    syncs (a failure discards it; one ``fsync`` before the rename makes it durable): no
    ``-journal`` file can outlive a kill, and creation does far fewer disk flushes.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> create_sqlite_store(d / "mlflow.db")
    >>> holds_nothing(d / "mlflow.db"), sorted(p.name for p in d.iterdir())
    (False, ['mlflow.db'])
    """
    import sqlite3

    from mlflow import MlflowClient
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from arecall.io.atomic import atomic_path

    target = Path(path)
    with atomic_path(target) as tmp:
        building = str(tmp.resolve())

        def private(dbapi_connection: Any, record: Any) -> None:
            if not isinstance(dbapi_connection, sqlite3.Connection):
                return
            (_, _, file), *_ = dbapi_connection.execute("PRAGMA database_list").fetchall()
            if file == building:
                dbapi_connection.execute("PRAGMA journal_mode = OFF")
                dbapi_connection.execute("PRAGMA synchronous = OFF")

        event.listen(Engine, "connect", private)
        try:
            MlflowClient(tracking_uri=f"sqlite:///{building}").search_experiments()
        finally:
            event.remove(Engine, "connect", private)
            _dispose(f"sqlite:///{building}")
        with tmp.open("rb+") as fh:
            os.fsync(fh.fileno())
        for leftover in ("-journal", "-wal", "-shm"):  # an old file's, never this new one's
            with suppress(FileNotFoundError):
                os.unlink(f"{target}{leftover}")


def _dispose(uri: str) -> None:
    """Close MLflow's pooled connections to ``uri`` (the temporary file is renamed away)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    engine = getattr(SqlAlchemyStore, "_engine_map", {}).pop(uri, None)
    if engine is not None:
        engine.dispose()


def artifact_root(uri: str) -> Path | None:
    """Where a sqlite store's experiments keep their artifacts: ``mlruns/`` beside the file.

    None for a server (it has its own). MLflow's client default is ``./mlruns`` of whatever
    directory the process creating the experiment runs in: a store in one place wrote its
    artifacts into another (a test's store into the repository's ``mlruns/``; a queued
    experiment's first run into DVC's temporary copy, deleted after it).

    Examples
    --------
    >>> artifact_root("sqlite:////repo/mlflow.db"), artifact_root("http://127.0.0.1:5000")
    (PosixPath('/repo/mlruns'), None)
    """
    path = _sqlite_path(uri)
    return None if path is None else Path(os.path.abspath(path)).parent / "mlruns"


def create_experiment(
    client: Any, uri: str, name: str, tags: Mapping[str, str] | None = None
) -> str:
    """Create experiment ``name`` with ``tags``; a sqlite store's keeps its artifacts beside it.

    The location is MLflow's own layout, ``mlruns/<experiment id>``, rooted at
    `artifact_root` instead of the current directory: MLflow's store assigns the id, so the
    experiment is created through a store built with that root.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with open_store(f"sqlite:///{d}/mlflow.db") as client:
    ...     eid = create_experiment(client, f"sqlite:///{d}/mlflow.db", "demo")
    ...     location = client.get_experiment(eid).artifact_location
    >>> location == str(d / "mlruns" / eid)
    True
    """
    root = artifact_root(uri)
    if root is None:
        return str(client.create_experiment(name, tags=dict(tags or {})))
    from mlflow.entities import ExperimentTag
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = SqlAlchemyStore(uri, str(root))
    tagged = [ExperimentTag(key, value) for key, value in (tags or {}).items()]
    return str(store.create_experiment(name, tags=tagged))


def _create_if_empty(uri: str) -> None:
    path = _sqlite_path(uri)
    if path is not None and holds_nothing(path):
        create_sqlite_store(path)


#: Stores this process has opened (made or migrated) already: a second open skips that query.
_OPENED: set[str] = set()


@contextmanager
def open_store(uri: str, *, orphans: bool = True) -> Iterator[Any]:
    """An `mlflow.MlflowClient` on ``uri``, under the store's lock, ready to write.

    The one way this package writes to a store. Under the lock: a server is probed (unreachable:
    `TrackingError` at once, not after MLflow's retries), a sqlite store that does not exist yet
    is created whole or not at all (`create_sqlite_store`), a sqlite store is opened (so its
    schema is migrated by one process at a time), and runs of dead processes on this host are
    closed (`arecall.tracking.orphans.close_orphans`).

    Examples
    --------
    >>> import tempfile
    >>> with open_store(f"sqlite:///{tempfile.mkdtemp()}/mlflow.db") as client:
    ...     [e.name for e in client.search_experiments()]
    ['Default']
    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    _bound_http()
    # creating a fresh store is routine, not news: MLflow's and alembic's INFO lines about it
    # would otherwise stand before (and break) the one-line error of a run that then fails
    for name in ("mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    with store_lock(uri):
        if not probe(uri):
            raise TrackingError(f"tracking server {uri} unreachable")
        if uri not in _OPENED:
            _create_if_empty(uri)
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        if orphans or uri not in _OPENED:
            experiments = client.search_experiments()  # creates/migrates a sqlite store, here
            _OPENED.add(uri)
            if orphans:
                close_orphans(client, [e.experiment_id for e in experiments])
        yield client
