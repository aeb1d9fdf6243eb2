"""``arecall run [overrides] [-m]``: the whole pipeline in one process for a Hydra config.

Outputs go to Hydra's run directory; ``-m`` sweeps, each point one MLflow run nested under the
sweep's parent run.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra.errors import CompactHydraException

from arecall.core.errors import ArecallError, note_user_error, noted_user_errors, print_error
from arecall.tracking.provenance import COMMAND_ENV

__all__ = [
    "check_callbacks",
    "check_composition",
    "check_group_choices",
    "run_main",
    "unique_token",
]

_TOKEN: list[str] = []


def unique_token() -> str:
    """This process's run-directory suffix: its pid and a random hex token, fixed per process.

    Hydra's default run directory has second resolution, so runs started together shared it
    (and one logged another's data). The pid makes the directory unique among live processes on
    this host, the random part across hosts sharing a file system.

    Examples
    --------
    >>> unique_token() == unique_token()
    True
    """
    if not _TOKEN:
        import secrets

        _TOKEN.append(f"{os.getpid()}-{secrets.token_hex(3)}")
    return _TOKEN[0]


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("arecall.unique"):
        OmegaConf.register_new_resolver("arecall.unique", unique_token)


def run_main(argv: Sequence[str]) -> int:
    """Compose the config from ``argv`` (Hydra overrides), run every stage, log to MLflow.

    Each run's MLflow run is opened before the stages (params, ``arecall.pid``/``arecall.host``)
    and ended FINISHED after the reports are logged; a failure ends it FAILED, SIGTERM / SIGINT
    KILLED (exit 143 / 130). In a ``-m`` sweep a failed point is FAILED and the other points still
    run; the sweep then exits non-zero and its parent run ends FAILED.
    """
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import DictConfig, OmegaConf

    from arecall.cli.run_help import run_help
    from arecall.pipeline.config import CONF_DIR
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.run import run_all
    from arecall.pipeline.schema import register
    from arecall.pipeline.stages import announce_stages
    from arecall.tracking.ends import Interrupted, interruptible, outcome_scope
    from arecall.tracking.sweep import end_sweep

    text = run_help(argv)
    if text is not None:
        print(text, end="")
        return 0
    root = os.getcwd()

    def body(cfg: DictConfig) -> float | None:
        with outcome_scope():  # until the point is printed, a signal ends its run KILLED
            return _point(cfg)

    def _point(cfg: DictConfig) -> float | None:
        config: Any = OmegaConf.to_container(cfg, resolve=True)
        hydra_cfg = HydraConfig.get()
        directory = hydra_cfg.runtime.output_dir
        layout = Layout.run(directory)
        sweep = hydra_cfg.mode == RunMode.MULTIRUN
        try:
            result = _tracked(config, layout, run_all, root, directory, hydra_cfg)
        except ArecallError as exc:
            if not sweep:
                sys.exit(print_error(exc))
            point = hydra_cfg.job.override_dirname or "defaults"
            print_error(f"sweep point {hydra_cfg.job.num} ({point}): {exc}")
            raise SweepPointFailed(point, str(exc)) from None
        printed = _Printed(Path(hydra_cfg.sweep.dir) if sweep else None)
        printed.once(result["tables"])
        if result.get("vector") is not None:  # the config asked for the vector experiment
            printed.once(layout.vector_table.read_text(encoding="utf-8"))
        for line in result.get("logged", ()):
            print(line)
        if "metrics" not in result:
            return None
        k_max = list(result["metrics"]["k"])[-1]
        value = result["metrics"]["k"][k_max]["arecall_pre_nonempty"]
        return None if value is None else float(value)

    task = hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(body)
    check_group_choices(argv, CONF_DIR)
    register()  # every route composes conf/, whose options extend the stored schemas
    _register_resolvers()
    single = _single_run_overrides(argv)
    if single is None:
        check_composition(argv)
    sys.argv = ["arecall run", *argv]
    # what a sweep's points (in joblib or Dask workers too) say made them
    os.environ[COMMAND_ENV] = "arecall run " + shlex.join(argv)
    try:
        with interruptible(), announce_stages():
            if single is None:
                with _without_hydras_lines_on_user_errors():
                    task()
            else:
                _run_single(single, body)
    except Interrupted as exc:
        end_sweep("KILLED")
        print(f"arecall: interrupted by {signal.Signals(exc.signum).name}", file=sys.stderr)
        raise
    except SystemExit as exc:  # Hydra exits 1 after printing a compact error: ours are user errors
        end_sweep("FAILED")
        if exc.code == 1 and noted_user_errors():
            raise SystemExit(2) from None
        raise
    except BaseException:
        end_sweep("FAILED")  # a point failed (Hydra raises after the sweep) or a bug
        raise
    finally:
        os.environ.pop(COMMAND_ENV, None)
    return 0


class _Printed:
    """Print a table once per sweep: each distinct table, by whichever point shows it first.

    A sweep's points run in this process, in joblib workers or on a Dask cluster, all writing
    into one sweep directory; a marker file per table (created exclusively, so one point wins)
    records what was shown. A single run prints every table.
    """

    def __init__(self, sweep_dir: Path | None) -> None:
        self.marks = None if sweep_dir is None else sweep_dir / ".arecall-printed"

    def once(self, text: str) -> None:
        if self.marks is not None:
            import hashlib

            self.marks.mkdir(parents=True, exist_ok=True)
            mark = self.marks / hashlib.sha256(text.encode()).hexdigest()[:32]
            try:
                os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
        print(text)


_SWEEP_FAILED = "arecall: error: the sweep had a failed point "


class SweepPointFailed(CompactHydraException):
    """A sweep point failed with a user error (already printed): Hydra's job-level failure.

    Raised from the task so Hydra marks the job FAILED and still runs the other points; after
    the sweep Hydra re-raises it and, being compact, prints this one line and exits 1, which
    `run_main` turns into 2, the exit status of every user error (`note_user_error`).
    """

    def __init__(self, point: str, error: str) -> None:
        super().__init__(f"{_SWEEP_FAILED}({point}: see above); the other points ran")
        self.point, self.error = point, error
        note_user_error(error)

    def __reduce__(self) -> tuple[Any, ...]:  # joblib workers send it back pickled
        return (SweepPointFailed, (self.point, self.error))


#: What Hydra writes to stderr around a failed sweep point, beside the point's own line:
#: before the failure it re-raises (``JobReturn.return_value``), and after it reports it
#: (``run_and_report``, even for a compact error, which has no stack trace to show).
_HYDRA_JOB_ERROR = "Error executing job with overrides: "
_HYDRA_HINT = "\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"


class _SweepStderr:
    r"""``sys.stderr`` during a sweep, less Hydra's two lines around a point's user error.

    A point that fails on bad input prints its one line (``sweep point N (...): <file>:
    <what>``), and the sweep ends with one line naming it (:class:`SweepPointFailed`). Hydra
    would add "Error executing job with overrides: [...]" before that last line and a hint
    to set HYDRA_FULL_ERROR for a stack trace after it. Each is one ``write`` call: the first
    is held until the next write shows whether it precedes our line (dropped) or anything
    else, a bug's report, which keeps it and the hint. Everything else passes through.

    Examples
    --------
    >>> import io
    >>> err = _SweepStderr(io.StringIO())
    >>> for text in ["progress\n", _HYDRA_JOB_ERROR + "['a=1']\n", _SWEEP_FAILED + "(a=1)\n",
    ...              _HYDRA_HINT, _HYDRA_JOB_ERROR + "['a=2']\n", "Traceback ...\n", _HYDRA_HINT]:
    ...     _ = err.write(text)
    >>> _ = err.write(_HYDRA_JOB_ERROR + "['a=3']\n")
    >>> err.flush()  # held through a flush, written at the end
    >>> err.release()
    >>> print(err.stream.getvalue(), end="")
    progress
    arecall: error: the sweep had a failed point (a=1)
    Error executing job with overrides: ['a=2']
    Traceback ...
    <BLANKLINE>
    Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
    Error executing job with overrides: ['a=3']
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._held = ""
        self._after_ours = False

    def write(self, text: str) -> int:
        held, self._held = self._held, ""
        after_ours, self._after_ours = self._after_ours, False
        if text.startswith(_HYDRA_JOB_ERROR):
            self.stream.write(held)
            self._held = text
        elif text.startswith(_SWEEP_FAILED):
            self.stream.write(text)  # ``held``, Hydra's line before ours, is dropped
            self._after_ours = True
        elif not (after_ours and text == _HYDRA_HINT):
            self.stream.write(held + text)
        return len(text)

    def flush(self) -> None:  # not the held line: a flush can come between it and ours
        self.stream.flush()

    def release(self) -> None:
        """Write a line still held (the block ends): nothing written is ever lost."""
        self.stream.write(self._held)
        self._held = ""
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding…: the real stream's
        return getattr(self.stream, name)


@contextlib.contextmanager
def _without_hydras_lines_on_user_errors() -> Iterator[None]:
    """``sys.stderr`` is a :class:`_SweepStderr` in the block (a sweep's launching process)."""
    real = sys.stderr
    sys.stderr = proxy = _SweepStderr(real)
    try:
        yield
    finally:
        proxy.release()
        sys.stderr = real


def _single_run_overrides(argv: Sequence[str]) -> list[str] | None:
    """The overrides of a plain single run (no ``-m``, ``--cfg``, ``--help``…), else None.

    Those are composed once (`_run_single`); anything else goes through ``hydra.main``.
    """
    from hydra._internal.utils import get_args_parser

    try:
        args = get_args_parser().parse_args(list(argv))
    except SystemExit:  # argparse's own usage error: hydra.main reports it
        return None
    special = (
        args.help,
        args.hydra_help,
        args.cfg,
        args.info,
        args.shell_completion,
        args.multirun,
        args.config_path,
        args.config_name,
        args.config_dir,
        getattr(args, "experimental_rerun", None),
        args.resolve,
        args.package,
    )
    if any(value not in (None, False) for value in special):
        return None
    if any(o.replace(" ", "").startswith("hydra.mode=") for o in args.overrides):
        return None
    return list(args.overrides)


def _run_single(overrides: list[str], body: Any) -> None:
    """Compose the config once, check it, then run ``body`` as Hydra's job (one composition).

    ``hydra.main`` composes a run's config twice (once to learn the mode, once to run) and the
    check before it a third time; each is a few tenths of a second of a run that takes
    seconds. Here the one composition is checked (schema, raw strings) before Hydra's job
    starts — so a refused config writes nothing — and is the config the job runs: Hydra's
    ``run_job`` makes the run directory, saves ``.hydra/`` and sets up logging as ``hydra.main``
    does. A composition Hydra refuses is reported by `default_config` in one line.
    """
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path, run_and_report
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import run_job
    from hydra.types import HydraContext, RunMode
    from omegaconf import OmegaConf, open_dict, read_write

    from arecall.cli.run_directory import RunDirectoryError, check_writable, undo_on_failure
    from arecall.pipeline.config import CONF_DIR, composition_error, override_origin
    from arecall.pipeline.schema import check_config, register

    register()
    GlobalHydra.instance().clear()
    app = Hydra.create_main_hydra2(
        task_name="arecall", config_search_path=create_config_search_path(str(CONF_DIR))
    )
    origin = override_origin(overrides)
    try:
        try:
            cfg = app.compose_config(
                "config", list(overrides), with_log_configuration=True, run_mode=RunMode.RUN
            )
            task_cfg = OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"])
            container: Any = OmegaConf.to_container(task_cfg, resolve=True)
        except Exception as exc:  # Hydra's, OmegaConf's, or a plain one OmegaConf let through
            GlobalHydra.instance().clear()  # composition_error composes with its own Hydra
            raise composition_error(list(overrides), exc) from None
        checked = check_config(container, origin=origin)
        _check_raw_strings(overrides, checked.params())
        check_callbacks(cfg.hydra.callbacks, origin)
        directory = _pinned_directory(cfg, "hydra.run.dir", origin)
        check_writable(directory)
        with read_write(cfg.hydra), open_dict(cfg.hydra):
            cfg.hydra.mode = RunMode.RUN
        from hydra._internal.callbacks import Callbacks

        callbacks = Callbacks(cfg)
        callbacks.on_run_start(config=cfg, config_name="config")
        refused: list[RunDirectoryError] = []

        def job() -> None:
            try:
                with undo_on_failure(directory):  # an OSError out of run_job is its setup's
                    ret = run_job(
                        hydra_context=HydraContext(
                            config_loader=app.config_loader, callbacks=callbacks
                        ),
                        task_function=body,
                        config=cfg,
                        job_dir_key="hydra.run.dir",
                        job_subdir_key=None,
                        configure_logging=True,
                    )
            except RunDirectoryError as exc:  # raised after run_and_report, as one line
                refused.append(exc)
                return
            callbacks.on_run_end(config=cfg, config_name="config", job_return=ret)
            _ = ret.return_value  # raises the job's exception, as Hydra.run does

        run_and_report(job)
        if refused:
            raise refused[0]
    finally:
        GlobalHydra.instance().clear()


def _pinned_directory(cfg: Any, key: str, origin: Any) -> str:
    """Resolve ``hydra.run.dir`` (or ``hydra.sweep.dir``) once, as Hydra would, and keep it.

    Resolved here, a failing interpolation is one line naming the override, and the directory
    checked (`check_writable`) is the one Hydra then creates, not one a second later.
    """
    from omegaconf import OmegaConf, open_dict, read_write

    directory = _resolved(cfg, key, origin)
    *parents, leaf = key.split(".")
    node = OmegaConf.select(cfg, ".".join(parents))
    with read_write(node), open_dict(node):
        node[leaf] = directory
    return directory


def check_callbacks(callbacks: Any, origin: Any) -> None:
    """Refuse, in one line naming the key, a ``hydra.callbacks`` entry Hydra would not create.

    Each ``_target_`` goes through Hydra's own instantiation as a partial (located and checked
    against Hydra's target policy, not called), so a target Hydra refuses (``os.system`` is
    blocklisted) or cannot find is named before anything starts, instead of ending in
    InstantiationException's stack once Hydra creates the callbacks.

    Examples
    --------
    >>> check_callbacks({"x": {"_target_": "os.system"}}, lambda key: None)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: hydra.callbacks.x._target_: Target 'os.system' is ...
    """
    from collections.abc import Mapping

    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from arecall.pipeline.config import hydra_message

    found: Any = OmegaConf.to_container(callbacks) if OmegaConf.is_config(callbacks) else callbacks
    for name, entry in dict(found or {}).items():
        key = f"hydra.callbacks.{name}"
        where = origin(f"{key}._target_") or origin(key)
        prefix = f"{where}: {key}" if where else key
        target = entry.get("_target_") if isinstance(entry, Mapping) else None
        if not isinstance(target, str) or not target:
            raise ArecallError(
                f"{prefix}: must be a mapping with a _target_ (a callback class), got {entry!r}"
            )
        try:
            instantiate({"_target_": target, "_partial_": True})
        except Exception as exc:
            text = hydra_message(exc).replace(
                ", set env var HYDRA_FULL_ERROR=1 to see chained exception.", ""
            )
            if exc.__cause__ is not None:
                text = f"{text.rstrip('.')}: {hydra_message(exc.__cause__)}"
            raise ArecallError(f"{prefix}._target_: {text}") from None


def _tracked(
    config: Any, layout: Any, run_all: Any, root: str, directory: str, hydra_cfg: Any
) -> dict[str, Any]:
    """Run the stages inside this run's MLflow run (untracked if tracking is disabled).

    A single run logs through the tracker process ``arecall run`` started at launch
    (`arecall.tracking.tracker`), so MLflow's import overlaps the stages; a sweep's points log
    in-process, nested under the sweep's parent run. Both log the same `pipeline_run`, timed
    by the stages, and the result's ``logged`` holds the lines naming the runs logged.
    """
    from hydra.types import RunMode

    from arecall.pipeline.config import checked
    from arecall.tracking.run import logged_line, now_ms
    from arecall.tracking.tracker import RemoteRun, take_tracker

    tracker = take_tracker()
    try:  # composed by Hydra: checked here, once, into the typed config the stages take
        cfg = checked(config)
    except ArecallError:
        if tracker is not None:
            tracker.close()
        raise
    if not cfg.tracking.enabled:
        if tracker is not None:
            tracker.close()
        result: dict[str, Any] = run_all(cfg, layout)
        return result
    config = cfg.params()  # what the run logs
    from arecall.tracking.pipeline import finish_pipeline_run, pipeline_run

    sweep = hydra_cfg.mode == RunMode.MULTIRUN
    run = pipeline_run(
        config,
        root=root,
        run_name=_run_name(hydra_cfg.job.override_dirname, sweep),
        entry="arecall run -m" if sweep else "arecall run",
        tags={"arecall.run_dir": str(directory)},
        results=(str(directory), str(directory)),
        start_time=now_ms(),
    )
    finish = {
        "config": config,
        "corpus": layout.corpus,
        "vector": None,
        "rank_info": layout.rank_info,
    }
    if tracker is not None:
        with RemoteRun(tracker, run) as remote:
            remote.start()
            result = run_all(cfg, layout)
            finish.update(_timed(result))
            run_id = remote.finish(layout.report_files(), **finish)
            nested = remote.nested
    else:
        with run:
            run.start()
            result = run_all(cfg, layout)
            finish.update(_timed(result))
            run_id = finish_pipeline_run(run, layout.report_files(), **finish)
            nested = run.nested
    if run_id is not None:
        result["logged"] = [logged_line(run_id, run.uri)] + [
            logged_line(child, run.uri, f"{name}, nested in {run_id}")
            for name, child in nested.items()
            if child is not None
        ]
    return result


def _run_name(overrides: str, sweep: bool) -> str:
    """A run's name: its overrides; a sweep point's, only those its sweep varies (the others
    are the sweep's parent run's name and every point's params).

    Examples
    --------
    >>> os.environ["ARECALL_SWEPT_KEYS"] = "retriever"
    >>> _run_name("corpus=synthetic,retriever=bm25", True), _run_name("", False)
    ('retriever=bm25', 'defaults')
    >>> del os.environ["ARECALL_SWEPT_KEYS"]
    """
    from arecall.compare.points import split_overrides
    from arecall.tracking.sweep import SWEPT_ENV

    swept = set(filter(None, os.environ.get(SWEPT_ENV, "").split(",")))
    if sweep and swept:
        varied = [o for o in split_overrides(overrides) if o.split("=", 1)[0] in swept]
        if varied:
            return ",".join(varied)
    return overrides or "defaults"


def _timed(result: dict[str, Any]) -> dict[str, Any]:
    """What `finish_pipeline_run` takes from ``run_all``'s result: the table and the times."""
    return {
        "vector": result.get("vector"),
        "end_time": result["times"][1],
        "vector_times": result.get("vector_times"),
    }


def check_group_choices(argv: Sequence[str], conf_dir: Path) -> None:
    """Refuse ``group=option`` overrides naming no option of the group, in one line.

    An option is the name of a YAML file of the group's directory, nothing else: a path
    (``retriever=../corpus/discovery``, ``corpus=./discovery``) would load another group's file
    and fail late with Hydra's own multi-line message. ``group@package=option`` is checked
    against ``group``; sweeps (``a,b``) check each choice.

    Examples
    --------
    >>> from arecall.pipeline.config import CONF_DIR
    >>> check_group_choices(["retriever=../corpus/discovery"], CONF_DIR)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: retriever=../corpus/discovery: no such retriever config ...
    """
    for arg in argv:
        key, sep, value = arg.partition("=")
        name = key.lstrip("+").split("@", 1)[0]
        if not sep or not name or "." in name or key.startswith(("~", "-", "hydra")):
            continue
        group = conf_dir / name
        if not group.is_dir() or "(" in value:  # choice(...), range(...): Hydra's sweep syntax
            continue
        known = sorted(p.stem for p in group.glob("*.yaml"))
        for option in value.split(","):
            if option not in known:
                raise ArecallError(
                    f"{key}={option}: no such {name} config (known: {', '.join(known)})"
                )


def check_composition(argv: Sequence[str]) -> None:
    """Compose and check the configuration of every run ``argv`` asks for, before any runs.

    Each point of a ``-m`` sweep is composed and checked against the schema
    (`arecall.pipeline.config.default_config`), so a bad value anywhere is one line naming the
    override and the key, and nothing is written. ``--help``-like flags skip the check.
    A value given as a string where the schema wants a number (``evaluation.ks=["5"]``) is
    refused as in params.yaml, although Hydra would convert it.
    """
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra._internal.utils import get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from arecall.pipeline.config import CONF_DIR, default_config, unparsable

    args = get_args_parser().parse_args(list(argv))
    if args.help or args.hydra_help or args.info or args.shell_completion:
        return
    points = [list(args.overrides)]
    if args.multirun:
        try:
            parsed = OverridesParser.create().parse_overrides(list(args.overrides))
        except HydraException as exc:
            raise unparsable(list(args.overrides), exc) from None
        # Hydra renders every override anew (``$\{…\}``): a point names them as the user did
        given = {
            f"{o.get_key_element()}={o.get_value_element_as_str()}": o.input_line
            for o in parsed
            if not o.is_sweep_override()
        }
        points = [
            [given.get(line, line) for line in point]
            for batch in BasicSweeper.split_arguments(parsed, None)
            for point in batch
        ]
    for point in points:
        check_group_choices(point, CONF_DIR)
        _check_raw_strings(point, default_config(point).params())
    if args.multirun:
        _check_launch(points)


def _check_launch(points: list[list[str]]) -> None:
    """What Hydra needs before the first job, checked as `_run_single` checks a single run.

    The callbacks (`check_callbacks`) and the sweep's directory (resolved, then
    `check_writable`), once per distinct set of ``hydra.*`` overrides among the points.
    """
    from arecall.cli.run_directory import check_writable
    from arecall.pipeline.config import hydra_config, override_origin

    seen: set[tuple[str, ...]] = set()
    for point in points:
        launch = tuple(o for o in point if o.lstrip("+~").startswith("hydra"))
        if launch in seen:
            continue
        seen.add(launch)
        cfg = hydra_config(point)
        origin = override_origin(point)
        check_callbacks(cfg.hydra.callbacks, origin)
        check_writable(_resolved(cfg, "hydra.sweep.dir", origin), "sweep")


def _resolved(cfg: Any, key: str, origin: Any) -> str:
    """``key`` of ``cfg`` resolved as Hydra would resolve it (a failure: one line)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from arecall.pipeline.config import hydra_message

    HydraConfig.instance().set_config(cfg)
    try:
        return str(OmegaConf.select(cfg, key))
    except Exception as exc:
        message = hydra_message(exc)
        message = message if message.startswith(f"{key}:") else f"{key}: {message}"
        raise ArecallError(f"{origin(key) or key}: {message}") from None


def _has_string(value: Any) -> bool:
    if isinstance(value, str):
        return "${" not in value  # an interpolation resolves to its target's type
    if isinstance(value, dict):
        return any(_has_string(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_string(v) for v in value)
    return False


def _check_raw_strings(point: Sequence[str], cfg: dict[str, Any]) -> None:
    """Check the overrides' values as given (Hydra converts ``"5"`` to 5 for an int field).

    Each override holding a string is put back, unconverted, into the checked configuration,
    which is checked again: the schema refuses a string where a number is expected, naming the
    override.
    """
    import copy

    from hydra.core.override_parser.overrides_parser import OverridesParser

    from arecall.pipeline.config import override_origin
    from arecall.pipeline.schema import check_config

    raw = copy.deepcopy(cfg)
    changed = False
    for o in OverridesParser.create().parse_overrides(list(point)):
        key = o.key_or_group
        if o.is_delete() or "@" in key or "." not in key or key.startswith("hydra"):
            continue
        value = o.value()
        if not _has_string(value):
            continue
        *path, leaf = key.split(".")
        node: Any = raw
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node:
            node[leaf] = value
            changed = True
    if changed:
        check_config(raw, origin=override_origin(point))
