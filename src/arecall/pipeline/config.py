"""Reading and checking the experiment configuration.

The same configuration reaches the pipeline two ways: DVC stages read ``params.yaml`` (which is
conf/'s composition, written by DVC on ``dvc exp run``), and ``arecall run`` composes conf/ with
Hydra. Both are checked by `arecall.pipeline.schema.check_config` against the typed schema of
each group option, before any stage runs: a bad value is one line naming where it came from
(``params.yaml`` or the override), the dotted key and what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from arecall.core.errors import ArecallError
from arecall.core.schema import ConfigProblem
from arecall.pipeline.schema import (
    GROUPS,
    VECTORS_REFUSAL,
    ExperimentConfig,
    check_config,
    register,
)

__all__ = [
    "CONF_DIR",
    "DVC_CONFIG",
    "checked",
    "composition_error",
    "default_config",
    "hydra_config",
    "hydra_message",
    "ks_of",
    "load_params",
    "unparsable",
]

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
#: The DVC pipeline's config (``config_name`` in .dvc/config): params.yaml is its composition.
DVC_CONFIG = "repro"


def load_params(path: str | Path = "params.yaml") -> ExperimentConfig:
    """Read ``params.yaml`` with ``yaml.safe_load`` and check it against the schema.

    Examples
    --------
    >>> load_params("/nonexistent.yaml")
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: /nonexistent.yaml: file not found
    """
    p = Path(path)
    if not p.is_file():
        raise ArecallError(f"{p}: file not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ArecallError(f"{p}: {where}invalid YAML") from None
    if not isinstance(data, dict):
        raise ArecallError(f"{p}: must be a mapping of config sections")
    return check_config(data, origin=str(p))


def ks_of(cfg: ExperimentConfig) -> tuple[int, ...]:
    """The K values, ascending and unique.

    Examples
    --------
    >>> ks_of(default_config(["evaluation.ks=[10,1,5,1]"]))
    (1, 5, 10)
    """
    return tuple(sorted(set(cfg.evaluation.ks)))


def checked(cfg: Mapping[str, Any], *, origin: str | None = None) -> ExperimentConfig:
    """Check a whole configuration against the schema; return it typed.

    Examples
    --------
    >>> checked({"corpus": {"name": "discovery"}, "retriever": {"name": "tfidf"},
    ...          "profiles": {"name": "corpus"}, "tracking": {},
    ...          "evaluation": {"ks": [1, 0]}})
    Traceback (most recent call last):
    ...
    arecall.core.schema.ConfigProblem: config: evaluation.ks[1]: must be a positive integer, got 0
    """
    return check_config(cfg, origin=origin)


def default_config(
    overrides: Sequence[str] | None = None, *, config_name: str = "config"
) -> ExperimentConfig:
    """Compose conf/ with Hydra (optionally with overrides), as ``arecall run`` would; check it.

    A bad value is one `ArecallError` naming the override that set it and the dotted key.
    ``config_name=DVC_CONFIG`` composes what DVC writes into params.yaml (``dvc exp run -S``).

    Examples
    --------
    >>> default_config(["retriever=sklearn_tfidf"]).retriever.name
    'sklearn_tfidf'
    >>> default_config(["vector_search.corpus.dims=abc"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.schema.ConfigProblem: vector_search.corpus.dims=abc: ...: must be ..., got 'abc'
    >>> default_config(["corpus=vectors"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: corpus=vectors is the vector experiment's corpus, ...
    """
    from omegaconf import OmegaConf

    overrides = list(overrides or [])
    origin = override_origin(overrides)
    try:
        composed = _compose(overrides, config_name)
        container = OmegaConf.to_container(composed, resolve=True)
    except Exception as exc:  # Hydra's, OmegaConf's, or one OmegaConf let through with a key
        if VECTORS_REFUSAL in str(exc):  # conf/corpus/vectors.yaml's resolver refused it
            raise ArecallError(VECTORS_REFUSAL) from None
        raise composition_error(overrides, exc) from None
    return check_config(container, origin=origin)


def _compose(overrides: list[str], config_name: str = "config", *, hydra: bool = False) -> Any:
    from hydra import compose, initialize_config_dir

    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name=config_name, overrides=overrides, return_hydra_config=hydra)


def hydra_config(overrides: Sequence[str]) -> Any:
    """The composition of ``overrides`` with its ``hydra`` section, unresolved (a DictConfig).

    What ``hydra.main`` will launch a sweep with: its callbacks and its sweep directory are
    checked from it before Hydra starts (`arecall.cli.run.check_composition`).
    """
    return _compose(list(overrides), hydra=True)


def _parsed(overrides: Sequence[str]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return list(OverridesParser.create().parse_overrides(list(overrides)))


def _is_choice(key: str) -> bool:
    return key in GROUPS or key.startswith("hydra")


def override_origin(overrides: Sequence[str]) -> Callable[[str], str | None]:
    """For a dotted key, the last override that set it (or chose its group's option).

    Examples
    --------
    >>> where = override_origin(
    ...     ["corpus=synthetic", "corpus.n_docs=abc", "index@vector_search.index=exact"]
    ... )
    >>> where("corpus.n_docs"), where("corpus.seed"), where("retriever.depth")
    ('corpus.n_docs=abc', 'corpus=synthetic', None)
    >>> where("vector_search.index.store"), where("index.name")
    ('index@vector_search.index=exact', None)
    """
    try:
        keys = [(o.package or o.key_or_group, o.input_line) for o in _parsed(overrides)]
    except Exception:  # unparsable overrides: Hydra's composition reports them
        keys = []

    def origin(key: str) -> str | None:
        for k, line in reversed(keys):
            if key == k or key.startswith((f"{k}.", f"{k}[")):
                return str(line)
        return None

    return origin


def _missing_option(exc: Exception) -> ArecallError | None:
    """An option Hydra found in no config group (``hydra/launcher=nope``; ours are refused
    earlier, from ``conf/``): the one line an unknown option of ours gets, listing the options
    Hydra found on its search path, plugins included. ``None`` for any other error.

    Examples
    --------
    >>> from hydra.errors import MissingConfigException
    >>> exc = MissingConfigException("...", "hydra/launcher/nope", ["joblib", "basic"])
    >>> print(_missing_option(exc))
    hydra/launcher=nope: no such hydra/launcher config (known: basic, joblib)
    """
    from hydra.errors import MissingConfigException

    if not isinstance(exc, MissingConfigException) or not exc.options:
        return None
    group, _, option = str(exc.missing_cfg_file or "").rpartition("/")
    if not group:
        return None
    known = ", ".join(sorted(exc.options))
    return ArecallError(f"{group}={option}: no such {group} config (known: {known})")


#: Lines of Hydra's and OmegaConf's messages that say nothing to a user of arecall.
_NOISE = ("object_type=", "reference_type=", "Set the environment variable HYDRA_FULL_ERROR")


def hydra_message(exc: BaseException) -> str:
    """Hydra's or OmegaConf's error as one line: its lines joined, the key it names in front.

    Hydra wraps a failed merge in "Error merging override …" with the reason in the cause;
    OmegaConf appends ``full_key: …`` and type lines, and sometimes re-raises a plain
    AttributeError or KeyError that way. The reason and the key are what a user can act on.

    Examples
    --------
    >>> from omegaconf.errors import ValidationError
    >>> exc = ValidationError("Value 'x' is not an int\\n    full_key: corpus.n_docs\\n"
    ...                       "    object_type=dict")
    >>> hydra_message(exc)
    "corpus.n_docs: Value 'x' is not an int"
    """
    text = str(exc)
    cause = exc.__cause__ or exc.__context__
    if text.startswith("Error merging override") and cause is not None:
        text = str(cause)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    key = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("full_key:")), "")
    kept = [ln for ln in lines if not ln.startswith(("full_key:", *_NOISE))]
    message = " ".join(kept) or type(exc).__name__
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if not isinstance(exc, HydraException | OmegaConfBaseException):  # say what it is
        message = f"{type(exc).__name__}: {message}"
    return f"{key}: {message}" if key and key not in message else message


def _failing_override(overrides: list[str], choices: list[str]) -> str | None:
    """The first override after which Hydra's composition fails (None: none alone does).

    Each is tried after the group choices and the overrides before it, as Hydra applies them.
    """
    from omegaconf import OmegaConf

    tried = list(choices)
    for line in overrides:
        if line in choices:
            continue
        tried.append(line)
        try:
            OmegaConf.to_container(_compose(tried), resolve=True)
        except Exception:
            return line
    return None


def unparsable(overrides: Sequence[str], exc: Exception) -> ArecallError:
    """The override Hydra's grammar refuses, with the reason, in one line.

    Examples
    --------
    >>> print(unparsable(["corpus=discovery", "evaluation.ks=[1"], ValueError("?")))
    evaluation.ks=[1: no viable alternative at input '[1' See https://hydra.cc/...
    """
    for line in overrides:
        try:
            _parsed([line])
        except Exception as bad:
            return ArecallError(f"{line}: {hydra_message(bad)}")
    return ArecallError(f"{' '.join(overrides)}: {hydra_message(exc)}")


def composition_error(overrides: list[str], exc: Exception) -> ArecallError:
    """Hydra refused the overrides: one line naming the override and the key.

    The overrides are redone one by one on plain data, where the schema check names the bad
    value; what the schema accepts but Hydra does not (``+key=`` on a key that exists, a
    syntax error, an interpolation that fails) is named by the first override after which the
    composition fails, with Hydra's message on one line (`hydra_message`).
    """
    from omegaconf import OmegaConf

    missing = _missing_option(exc)
    if missing is not None:
        return missing
    try:
        parsed = _parsed(overrides)
    except Exception:
        return unparsable(overrides, exc)
    choices = [o.input_line for o in parsed if _is_choice(o.key_or_group)]
    try:
        container: Any = OmegaConf.to_container(_compose(choices), resolve=True)
    except Exception:
        return ArecallError(f"{' '.join(choices)}: {hydra_message(exc)}")
    for o in parsed:
        if _is_choice(o.key_or_group):
            continue
        *path, last = o.key_or_group.split(".")
        node = container
        for part in path:
            node = node.setdefault(part, {}) if isinstance(node, dict) else {}
        if not isinstance(node, dict):
            continue
        if o.is_delete():
            node.pop(last, None)
        else:
            node[last] = o.value()
        try:
            check_config(container, origin=str(o.input_line))
        except ConfigProblem as problem:  # this override's key, not one a later one sets
            key = str(o.key_or_group)
            if problem.key == key or problem.key.startswith((f"{key}.", f"{key}[")):
                return problem.at(str(o.input_line))
    try:
        check_config(container, origin=override_origin(overrides))
    except ConfigProblem as problem:
        return problem
    failing = _failing_override([str(o.input_line) for o in parsed], choices)
    return ArecallError(f"{failing or ' '.join(overrides)}: {hydra_message(exc)}")
