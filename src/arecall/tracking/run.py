"""One MLflow run: created, written within MLflow's limits, ended whatever happens.

`TrackedRun` is the one way a product writes a run (through `arecall.tracking.store.open_store`):
``start`` creates it with its tags, ``finish`` logs params, metrics and tags in as few batches as
MLflow's limits allow, then the artifacts, and ends it FINISHED; used as a block it ends FAILED
on an exception and KILLED on a signal (`arecall.tracking.ends`). What a product logs (its
params, metrics, tables) is defined in its own module: `arecall.tracking.pipeline`,
`arecall.tracking.vector`, `arecall.tracking.evaluate`, `arecall.tracking.sweep`.

Names from the data (principals) never become MLflow keys unescaped (`safe_key`); a param value
past MLflow's limit is cut and kept in full as ``params_full.json``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from arecall.tracking.ends import RunBlock, error_text, finished, held_signals
from arecall.tracking.orphans import owner_tags
from arecall.tracking.store import (
    TrackingError,
    create_experiment,
    is_server,
    open_store,
    probe,
)

__all__ = [
    "EXPERIMENT_KIND",
    "UPLOAD_STEPS",
    "Artifacts",
    "TrackedRun",
    "flatten",
    "logged_line",
    "now_ms",
    "publish_artifacts",
    "safe_key",
    "staged_artifacts",
    "upload_bar",
]

#: The experiment tag MLflow's UI reads to choose its layout, and the value that opens on the
#: runs table (MLflow's "Machine learning" kind; without it MLflow 3 opens a GenAI overview of
#: traces, which arecall never logs).
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")

#: What a run's upload does, in order: the steps of its progress bar.
UPLOAD_STEPS = ("params, metrics and tags", "artifacts", "status")

#: MLflow's limits (mlflow.utils.validation): per log_batch call, and on a param value's length.
_PARAMS_PER_BATCH, _METRICS_PER_BATCH, _PARAM_VALUE_MAX, _TAG_VALUE_MAX = 100, 1000, 6000, 8000


def safe_key(index: int, name: str, *, width: int = 40) -> str:
    """An MLflow-safe key part for a name from the data: its index plus a readable remainder.

    The index (the name's position in a fixed order) makes keys distinct whatever the names;
    the rest keeps letters, digits, ``_`` and ``-`` only, truncated to ``width``. The mapping key
    → name is logged with the run (``keys.json``).

    Examples
    --------
    >>> safe_key(3, "a:b"), safe_key(4, "a;b"), safe_key(0, "../../x")
    ('p003_a_b', 'p004_a_b', 'p000_x')
    >>> len(safe_key(1, "n" * 300))
    45
    """
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:width]
    return f"p{index:03d}_{readable}" if readable else f"p{index:03d}"


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted keys → string values, for MLflow params.

    Examples
    --------
    >>> flatten({"a": {"b": 1, "c": [1, 2]}, "d": None})
    {'a.b': '1', 'a.c': '[1, 2]', 'd': 'None'}
    """
    out: dict[str, str] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = str(list(value)) if isinstance(value, list | tuple) else str(value)
    return out


def _params(flat: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Params within MLflow's value limit, and the full values of the ones cut short."""
    out, cut = {}, {}
    for key, value in flat.items():
        if len(value) > _PARAM_VALUE_MAX:
            note = f"... ({len(value)} characters; in full in params_full.json)"
            out[key], cut[key] = value[: _PARAM_VALUE_MAX - len(note)] + note, value
        else:
            out[key] = value
    return out, cut


Artifacts = Callable[[Any, str], None]


def logged_line(run_id: str, uri: str, what: str = "") -> str:
    """The line every tracked command prints for each run it logged: its id and its store.

    Examples
    --------
    >>> logged_line("ab12", "sqlite:///mlflow.db")
    'mlflow: logged run ab12 to sqlite:///mlflow.db'
    >>> logged_line("cd34", "sqlite:///mlflow.db", "vector_search, nested in ab12")
    'mlflow: logged run cd34 (vector_search, nested in ab12) to sqlite:///mlflow.db'
    """
    return f"mlflow: logged run {run_id}{f' ({what})' if what else ''} to {uri}"


def now_ms() -> int:
    """The time now as MLflow stores it: milliseconds since the epoch."""
    return int(time.time() * 1000)


class TrackedRun(RunBlock):
    """One MLflow run, written through `open_store`; ends FAILED or KILLED if the block fails.

    `start` creates the run (tags, params); `finish` logs the metrics in batches and the
    artifacts and ends it FINISHED (`upload` logs them and leaves the status to `end`, for a
    process that learns the outcome from another). Used as a context manager, an exception ends
    the run FAILED (with ``arecall.error``) and `Interrupted` / KeyboardInterrupt KILLED; so does
    a signal after it was ended FINISHED, inside `arecall.tracking.ends.outcome_scope`. A store
    that cannot be written does not stop the work: the failure is remembered and reported once
    by `finish`, as `TrackingError` (``on_error="fail"``) or a warning (``"warn"``), naming
    ``results`` — the directory holding the results — and the ``arecall log`` argument that logs
    them later.

    Examples
    --------
    >>> import tempfile
    >>> uri = f"sqlite:///{tempfile.mkdtemp()}/mlflow.db"
    >>> with TrackedRun(uri, "demo", run_name="r", params={"a": "1"}) as run:
    ...     run.start()
    ...     run_id = run.finish({"m": 0.5})
    >>> from mlflow import MlflowClient
    >>> got = MlflowClient(uri).get_run(run_id)
    >>> got.info.status, got.data.metrics, got.data.params
    ('FINISHED', {'m': 0.5}, {'a': '1'})
    """

    def __init__(
        self,
        uri: str,
        experiment: str,
        *,
        run_name: str | None = None,
        tags: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        results: tuple[str, str] | None = None,
        on_error: str = "fail",
        start_time: int | None = None,
        experiment_tags: Mapping[str, str] | None = None,
    ) -> None:
        self.uri, self.experiment, self.run_name = uri, experiment, run_name
        #: tags the experiment must hold (set when it is created, updated when they differ)
        self.experiment_tags = dict(experiment_tags or {})
        #: when the work the run reports began (epoch ms); None: when the run is created
        self.start_time = start_time
        self.tags = {**owner_tags(), **(tags or {})}  # (the tracker is sent its owner's)
        self.params = dict(params or {})
        self.results, self.on_error = results, on_error
        self.run_id: str | None = None
        #: runs this one's logging nested in it, by name (the vector experiment's)
        self.nested: dict[str, str | None] = {}
        self._failure: BaseException | None = None
        self._ended = False
        self._uploaded = False
        self._status: str | None = None

    def start(self) -> None:
        """Create the run with its tags (a store failure is kept for `finish`).

        The params travel with the run's one `log_batch`, at its end whatever the end: with the
        metrics (`finish`) or with the error (`end`); only a kill -9 of the process that writes
        leaves a run without them (its tags still hold the command and the config hash).
        """
        try:
            with open_store(self.uri) as client:
                experiment = _experiment_id(client, self.experiment, self.uri, self.experiment_tags)
                with held_signals():  # a run created is a run whose id its owner knows
                    run = client.create_run(
                        experiment,
                        start_time=self.start_time,
                        run_name=self.run_name,
                        tags=self.tags,
                    )
                    self.run_id = str(run.info.run_id)
        except Exception as exc:  # any store failure: the results come first
            self._failure = exc

    def log_params(self) -> None:
        """Log the params now, for a run with no end of its own to carry them (a sweep's parent)."""
        if self.run_id is None or self._failure is not None:
            return
        try:
            with open_store(self.uri, orphans=False) as client:
                self._log_params_with(client)
        except Exception as exc:  # as in start: kept, the points report the store
            self._failure = exc

    def _log_params_with(
        self,
        client: Any,
        *,
        metrics: Mapping[str, float] | None = None,
        stepped: Sequence[tuple[str, float, int]] = (),
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """The run's params with its last metrics and tags: one `log_batch` in MLflow's limits."""
        assert self.run_id is not None
        params, cut = _params(self.params)
        _log_batches(
            client, self.run_id, params=params, metrics=metrics, stepped=stepped, tags=tags
        )
        if cut:
            client.log_dict(self.run_id, cut, "params_full.json")

    def upload(
        self,
        metrics: Mapping[str, float] | None = None,
        stepped: Sequence[tuple[str, float, int]] = (),
        artifacts: Artifacts | None = None,
        *,
        tags: Mapping[str, str] | None = None,
        progress: Callable[[str], None] | None = None,
        inputs: Sequence[Mapping[str, str]] = (),
    ) -> str | None:
        """Log params, metrics and ``tags`` (one batch), ``inputs`` and artifacts; the run stays
        RUNNING.

        Returns the run id, or None when the store could not be written: the run is then ended
        FAILED (if the store still takes that) and the failure kept for `report_failure`.
        ``progress`` is told the first two `UPLOAD_STEPS` as they are done. ``inputs`` are MLflow
        datasets (`mlflow.entities.Dataset`'s fields; ``context`` its input tag), what the runs
        table's Dataset column shows.
        """
        if self._failure is None:
            try:
                with open_store(self.uri, orphans=False) as client:
                    assert self.run_id is not None
                    done = progress or (lambda step: None)
                    self._log_params_with(client, metrics=metrics, stepped=stepped, tags=tags)
                    if inputs:
                        _log_inputs(client, self.run_id, inputs)
                    done(UPLOAD_STEPS[0])
                    if artifacts is not None:
                        artifacts(client, self.run_id)
                    done(UPLOAD_STEPS[1])
                    self._uploaded = True
                    return self.run_id
            except Exception as exc:
                self.end("FAILED", exc)  # best effort: a store that is down stays RUNNING
                self._failure = exc
        return None

    def finish(
        self,
        metrics: Mapping[str, float] | None = None,
        stepped: Sequence[tuple[str, float, int]] = (),
        artifacts: Artifacts | None = None,
        *,
        tags: Mapping[str, str] | None = None,
        progress: Callable[[str], None] | None = None,
        inputs: Sequence[Mapping[str, str]] = (),
        end_time: int | None = None,
    ) -> str | None:
        """Log params, metrics and ``tags`` (one batch) and artifacts; end FINISHED; the run id.

        None when the store could not be written and ``on_error`` is ``warn``. ``progress`` is
        told each of the `UPLOAD_STEPS` as it is done (a bar for a slow store). ``inputs``: as
        `upload`; ``end_time`` (epoch ms) when the work ended (default: now).
        """
        uploaded = self.upload(
            metrics, stepped, artifacts, tags=tags, progress=progress, inputs=inputs
        )
        if uploaded is not None:
            # a store that refuses it: FAILED, kept for report_failure
            self.end("FINISHED", end_time=end_time)
            if self.status == "FINISHED":
                (progress or (lambda step: None))(UPLOAD_STEPS[2])
                return self.run_id
        self.report_failure()
        return None

    def report_failure(self) -> None:
        """Say once that the store could not be written: `TrackingError`, or a ``warn`` line."""
        if self._failure is not None:
            self._report(self._failure)

    def _report(self, exc: BaseException) -> None:
        if is_server(self.uri) and (isinstance(exc, TrackingError) or not probe(self.uri)):
            what = f"tracking server {self.uri} unreachable"
        else:
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            what = f"tracking store {self.uri} failed: {type(exc).__name__}: {first}"
        if self.results is not None:
            where, target = self.results
            what += f"; results are in {where}; log them later with: arecall log {target}"
        if self.on_error == "warn":
            print(f"arecall: warning: {what}", file=sys.stderr)
            return None
        raise TrackingError(what) from None

    def end(
        self,
        status: str,
        error: BaseException | str | None = None,
        *,
        end_time: int | None = None,
    ) -> None:
        """End the run with ``status`` (FAILED, KILLED), the error as a tag; never raises.

        ``end_time`` (epoch ms): when the work ended (default: now).

        ``error`` is the exception, or its ``Type: message`` text (sent by another process). A
        run ended FINISHED already is ended KILLED again by a KILLED end (a signal came as it
        was being ended, `relabel`); any other second end is ignored. A FINISHED end after
        `upload` that the store refuses ends the run FAILED and is kept for `report_failure`.
        """
        if self.run_id is None or self._failure is not None:
            return
        if self._ended:
            if self._status == "FINISHED" and status == "KILLED":
                why = error_text(error) if error is not None else "interrupted as it was ended"
                self.relabel(status, why)
            return
        self._ended = True
        try:
            with open_store(self.uri, orphans=False) as client:
                tags = {}
                if error is not None:
                    tags["arecall.error"] = error_text(error)
                if self._uploaded:  # its batch carried the params
                    _log_batches(client, self.run_id, tags=tags)
                else:
                    self._log_params_with(client, tags=tags)
                with held_signals():
                    client.set_terminated(self.run_id, status, end_time=end_time)
                    self._status = status
                    if status == "FINISHED":
                        finished(self)
        except Exception as exc:  # the run's own error is the one to report
            if status == "FINISHED":  # but a finish in two steps reports its own, as `finish`
                self._ended = False
                self.end("FAILED", exc)
                self._failure = exc
        except BaseException:  # a signal before the status was written: the block's end writes it
            if self._status is None:
                self._ended = False
            raise

    @property
    def status(self) -> str | None:
        """The status this process ended the run with (None: not ended)."""
        return self._status

    def relabel(self, status: str, error: str) -> None:
        """End KILLED a run this process ended FINISHED, with why as its tag; never raises.

        A signal reached the process after its run's results were logged but before it was done
        (`arecall.tracking.ends.outcome_scope`): its exit status is 128 + the signal's, and so the
        run is not FINISHED.
        """
        if self.run_id is None or self._status != "FINISHED":
            return
        self._status = status
        try:
            with open_store(self.uri, orphans=False) as client:
                _log_batches(client, self.run_id, tags={"arecall.error": error})
                client.set_terminated(self.run_id, status)
        except Exception:  # the signal's own line is the one to report
            pass


def _experiment_id(client: Any, name: str, uri: str, tags: Mapping[str, str] | None = None) -> str:
    """The experiment ``name``'s id: created with `EXPERIMENT_KIND` and ``tags``, or given them.

    An experiment made before arecall set the kind (or one whose kind the UI only inferred) is
    updated; a kind a user chose in the UI is left as they chose it. A tag of ``tags`` the
    experiment lacks or holds with another value is set (one call each).
    """
    key, kind = EXPERIMENT_KIND
    wanted = {key: kind, **(tags or {})}
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            return create_experiment(client, uri, name, tags=wanted)
        except Exception:  # created meanwhile by another client of a server
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
    held = experiment.tags or {}
    current = held.get(key)
    if current is None or current.endswith("_inferred") or current == "no_inferred_type":
        _set_experiment_tag(client, experiment.experiment_id, key, kind)
    for tag, value in (tags or {}).items():
        if held.get(tag) != value:
            _set_experiment_tag(client, experiment.experiment_id, tag, value)
    return str(experiment.experiment_id)


def _set_experiment_tag(client: Any, experiment_id: str, key: str, value: str) -> None:
    """Set an experiment tag, also when another client sets the same new tag at the same moment.

    Sweep points on a cluster start together: two may both find a tag missing and both insert
    it, and the store refuses the second insert (a UNIQUE constraint on the tag's key). The tag
    exists then, so setting it once more is an update and succeeds.

    Examples
    --------
    >>> class Racing:
    ...     calls = 0
    ...     def set_experiment_tag(self, *args):
    ...         Racing.calls += 1
    ...         if Racing.calls == 1:
    ...             raise RuntimeError("UNIQUE constraint failed: experiment_tags.key")
    >>> _set_experiment_tag(Racing(), "1", "k", "v"); Racing.calls
    2
    """
    _again_if_raced(client.set_experiment_tag, experiment_id, key, value)


def _again_if_raced(write: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """``write(*args, **kwargs)``, and once more where the store refused it: a write that
    inserts what it finds missing is refused when another client inserted the same row at the
    same moment (a UNIQUE constraint), the refused write rolled back whole. The row exists
    then, and the same write again updates or links it. A second refusal is a real one and
    is raised."""
    try:
        write(*args, **kwargs)
    except Exception:  # inserted meanwhile by another client
        write(*args, **kwargs)


def _log_inputs(client: Any, run_id: str, inputs: Sequence[Mapping[str, str]]) -> None:
    """Log datasets as the run's inputs (name, digest, source; ``context``: the input's tag),
    also when another client logs the same new dataset at the same moment.

    Sweep points on a cluster log the same corpus together: two may both find the dataset
    missing and both insert it, and the store refuses the second insert (``UNIQUE constraint
    failed: datasets.experiment_id, datasets.name, datasets.digest``, the whole call rolled
    back). The dataset exists then, so logging the inputs once more links it.

    Examples
    --------
    >>> class Racing:
    ...     calls = 0
    ...     def log_inputs(self, run_id, datasets):
    ...         Racing.calls += 1
    ...         if Racing.calls == 1:
    ...             raise RuntimeError("UNIQUE constraint failed: datasets.experiment_id")
    >>> _log_inputs(Racing(), "r", [{"name": "c", "digest": "d", "source_type": "local",
    ...                             "source": "s"}]); Racing.calls
    2
    """
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    datasets = [
        DatasetInput(
            Dataset(
                name=d["name"],
                digest=d["digest"],
                source_type=d["source_type"],
                source=d["source"],
                profile=d.get("profile"),
            ),
            tags=[InputTag(MLFLOW_DATASET_CONTEXT, d["context"])] if d.get("context") else [],
        )
        for d in inputs
    ]
    _again_if_raced(client.log_inputs, run_id, datasets=datasets)


def _log_batches(
    client: Any,
    run_id: str,
    *,
    params: Mapping[str, str] | None = None,
    metrics: Mapping[str, float] | None = None,
    stepped: Sequence[tuple[str, float, int]] = (),
    tags: Mapping[str, str] | None = None,
) -> int:
    """Params, metrics and tags in as few `log_batch` calls as MLflow's limits allow.

    Each call takes up to 1000 metrics, 100 params and 100 tags (1000 entities in all): a
    pipeline run's metrics and tags are one call. Returns the number of calls made.
    """
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    plist = [Param(k, v) for k, v in (params or {}).items()]
    mlist = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()]
    mlist += [Metric(k, float(v), now, step) for k, v, step in stepped]
    tlist = [RunTag(k, v[:_TAG_VALUE_MAX]) for k, v in (tags or {}).items()]
    calls = 0
    while plist or mlist or tlist:
        p, plist = plist[:_PARAMS_PER_BATCH], plist[_PARAMS_PER_BATCH:]
        t, tlist = tlist[:_PARAMS_PER_BATCH], tlist[_PARAMS_PER_BATCH:]
        room = _METRICS_PER_BATCH - len(p) - len(t)
        m, mlist = mlist[:room], mlist[room:]
        client.log_batch(run_id, metrics=m, params=p, tags=t)
        calls += 1
    return calls


def staged_artifacts(
    client: Any,
    run_id: str,
    tables: Mapping[str, Any],
    documents: Mapping[str, Any],
    reports: Mapping[str, Path],
    top: Mapping[str, Path] | None = None,
) -> None:
    """Write every artifact into one staging directory, then publish it whole or not at all.

    MLflow's ``log_table`` / ``log_dict`` / ``log_artifact`` are a store round trip each (a
    ``log_table`` three: it reads the run back to extend a tag), about two seconds for a
    pipeline run; the files are the same: tables as pandas' ``orient="split"`` JSON (what
    ``log_table`` writes and ``load_table`` reads), documents as indented JSON, the report
    files under ``reports/``, and ``top`` (name → file) at the top, where MLflow's Compare
    looks. They go to the run's artifact repository file by file (`publish_artifacts`), not
    with ``log_artifacts``, whose copy into a local store leaves a truncated file when the
    disk fills.
    """
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="arecall-artifacts-") as tmp:
        root = Path(tmp)
        for name, frame in tables.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            frame.to_json(root / name, orient="split", index=False, date_format="iso")
        for name, data in documents.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
        for name, path in (top or {}).items():
            shutil.copyfile(path, root / name)
        (root / "reports").mkdir()
        for path in reports.values():
            if Path(path).is_file():
                shutil.copyfile(path, root / "reports" / Path(path).name)
        publish_artifacts(client, run_id, root)


def publish_artifacts(client: Any, run_id: str, root: Path) -> None:
    """Log every file under ``root`` as the run's artifacts: all of them whole, or none.

    Each file goes through the artifact repository's ``log_artifact``, which MLflow writes to
    a temporary file and renames into place in a local store, so no reader ever sees a
    truncated file. If any fails (a full disk, a lost server), the artifacts this call
    published are deleted again and the error is raised: the run then ends FAILED and says
    where the results are, and ``arecall log`` publishes them later, whole.
    """
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    repo = get_artifact_repository(client.get_run(run_id).info.artifact_uri)
    tops = sorted(p.name for p in root.iterdir())
    try:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            where = path.parent.relative_to(root).as_posix()
            repo.log_artifact(str(path), None if where == "." else where)
    except BaseException:
        for top in tops:  # best effort: the error that stopped the upload is the one to tell
            with suppress(Exception):
                repo.delete_artifacts(top)
        raise


@contextmanager
def upload_bar() -> Iterator[Any]:
    """The MLflow upload's tqdm bar (`UPLOAD_STEPS`), drawn on a terminal only."""
    from tqdm import tqdm

    with tqdm(total=len(UPLOAD_STEPS), desc="mlflow", unit="step", disable=None) as bar:
        yield bar
