"""``arecall log DIR``: log a finished run's results to MLflow later (after a tracking outage).

Why: a run whose tracking store could not be written keeps its results and says so in one line,
``… results are in DIR; log them later with: arecall log DIR``. This is that later step, through
the same code path as every other store write (`arecall.tracking.pipeline.log_run`).

``DIR`` is either an ``arecall run`` directory (its config is Hydra's ``DIR/.hydra/config.yaml``,
its reports at the top) or a DVC repository (``DIR/params.yaml`` and ``DIR/reports/``, what the
DVC track stage names as ``arecall log .``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arecall.core.errors import ArecallError

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = ["log_main"]

USAGE = (
    "usage: arecall log [--force] DIR  "
    "(an `arecall run` directory, or a DVC repository: params.yaml)"
)


def log_main(argv: Sequence[str]) -> int:
    """Log the results in ``argv[0]`` as one MLflow run; return the exit status.

    Examples
    --------
    >>> log_main(["/nonexistent-run-dir"])
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: /nonexistent-run-dir: not a run directory (no .hydra/config.yaml, no params.yaml)
    """  # noqa: E501 (a doctest's expected line)
    from arecall.pipeline.config import load_params
    from arecall.pipeline.layout import Layout
    from arecall.tracking.pipeline import experiment_name, log_run, logged_runs, reports_digest
    from arecall.tracking.run import logged_line
    from arecall.tracking.store import tracking_uri

    args = list(argv)
    if args and args[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    force = "--force" in args
    args = [a for a in args if a != "--force"]
    if len(args) != 1:
        raise ArecallError(f"log: expected one directory ({USAGE.removeprefix('usage: ')})")
    directory = Path(args[0])
    if (directory / "params.yaml").is_file():
        config, layout, entry = load_params(directory / "params.yaml"), Layout.dvc(directory), "dvc"
    elif (directory / ".hydra" / "config.yaml").is_file():
        config, layout = _run_config(directory / ".hydra" / "config.yaml"), Layout.run(directory)
        entry = "arecall run"
    else:
        raise ArecallError(
            f"{directory}: not a run directory (no .hydra/config.yaml, no params.yaml)"
        )
    cfg = config.params()  # what the run logs
    reports = layout.report_files()
    if "metrics" not in reports and "vector_csv" not in reports:
        raise ArecallError(
            f"{layout.reports}: no results to log (no metrics.json or vector_search.csv)"
        )
    if not force:
        uri = tracking_uri(".")
        done = logged_runs(uri, experiment_name(cfg), reports_digest(reports))
        if done:
            raise ArecallError(
                f"{directory}: these results are already logged (run {done[0]} in {uri}); "
                "nothing logged (--force logs them again)"
            )
    nested: dict[str, str | None] = {}
    run_id = log_run(
        {**cfg, "tracking": {**cfg["tracking"], "on_error": "fail"}},
        reports,
        run_name=f"log {directory}",
        entry="arecall log",
        tags={"arecall.logged_from": entry, "arecall.run_dir": str(directory.resolve())},
        rank_info=layout.rank_info,
        corpus=layout.corpus,
        nested=nested,
    )
    uri = tracking_uri(".")
    print(logged_line(str(run_id), uri), file=sys.stderr)
    for name, child in nested.items():
        if child is not None:
            print(logged_line(child, uri, f"{name}, nested in {run_id}"), file=sys.stderr)
    return 0


#: The only interpolations a saved run config may hold: arecall's own resolvers, argument-free
#: (``vector_search.corpus.name: ${arecall.vector_search_only:}``, as Hydra saves it). They read
#: nothing from the environment; anything else (``${oc.env:…}``) is never resolved here.
_OWN_RESOLVER = re.compile(r"\$\{arecall\.[A-Za-z_]+:\}")


def _run_config(path: Path) -> ExperimentConfig:
    """The config Hydra saved for a run, checked like params.yaml; interpolations refused.

    Hydra saves the composition unresolved. The directory being logged may come from someone
    else: resolving its ``${oc.env:…}`` would copy this machine's environment (a token) into
    the tracking server. So the file is read as plain YAML (``yaml.safe_load``), a value holding
    any interpolation but arecall's own resolvers is one error naming its key, and only those
    resolvers are resolved (by OmegaConf, the same code as when the run was composed).
    """
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from arecall.pipeline.config import checked
    from arecall.pipeline.schema import register

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
        raise ArecallError(f"{path}: cannot read the run's config: {exc}") from None
    if not isinstance(data, dict):
        raise ArecallError(f"{path}: must be a mapping of config sections")
    for key, value in _leaves(data):
        if isinstance(value, str) and "${" in value and not _OWN_RESOLVER.fullmatch(value):
            raise ArecallError(
                f"{path}: {key} is an interpolation; arecall log resolves none from a run "
                "directory (write its value there)"
            )
    register()
    try:
        resolved = OmegaConf.to_container(OmegaConf.create(data), resolve=True)
    except (OmegaConfBaseException, ValueError) as exc:
        raise ArecallError(f"{path}: cannot read the run's config: {exc}") from None
    assert isinstance(resolved, dict)
    return checked({str(k): v for k, v in resolved.items()}, origin=str(path))


def _leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every (dotted key, value) of a YAML document's mappings and lists.

    Examples
    --------
    >>> list(_leaves({"a": {"b": 1, "c": ["x", {"d": 2}]}}))
    [('a.b', 1), ('a.c[0]', 'x'), ('a.c[1].d', 2)]
    """
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, f"{prefix}[{i}]")
    else:
        yield prefix, node
