"""Reading and checking the experiment configuration.

The same configuration reaches the pipeline two ways: DVC stages read ``params.yaml`` (which is
conf/'s composition, written by DVC on ``dvc exp run``), and ``arecall run`` receives Hydra's
composed config. Both go through `load_params` / `checked`, which turn a bad value into one line
naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from arecall.core.errors import ArecallError

__all__ = ["CONF_DIR", "checked", "default_config", "flatten", "ks_of", "load_params"]

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
SECTIONS = ("corpus", "retriever", "profiles", "evaluation", "tracking")
PLACEMENTS = ("post", "pre")


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read ``params.yaml`` with ``yaml.safe_load`` and check it.

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
    return checked(data, origin=str(p))


def ks_of(cfg: Mapping[str, Any]) -> tuple[int, ...]:
    """The K values, ascending and unique."""
    return tuple(sorted({int(k) for k in cfg["evaluation"]["ks"]}))


def checked(cfg: Mapping[str, Any], *, origin: str = "config") -> dict[str, Any]:
    """Check the sections every stage relies on; return a plain dict.

    Examples
    --------
    >>> checked({"corpus": {}, "retriever": {}, "profiles": {}, "tracking": {},
    ...          "evaluation": {"ks": [1, 0], "placements": ["post", "pre"]}})
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: config: evaluation.ks[1]: must be a positive integer, got 0
    """
    data = dict(cfg)
    for section in SECTIONS:
        if not isinstance(data.get(section), Mapping):
            raise ArecallError(f"{origin}: {section}: missing config section")
    ev = data["evaluation"]
    ks = ev.get("ks")
    if not isinstance(ks, list | tuple) or not ks:
        raise ArecallError(f"{origin}: evaluation.ks: must be a non-empty list of integers")
    for i, k in enumerate(ks):
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ArecallError(f"{origin}: evaluation.ks[{i}]: must be a positive integer, got {k}")
    placements = ev.get("placements")
    if not isinstance(placements, list | tuple) or set(placements) != set(PLACEMENTS):
        raise ArecallError(
            f"{origin}: evaluation.placements: must list both 'post' and 'pre', got {placements}"
        )
    if data["corpus"].get("name") == "vectors":
        return data  # verity's experiment: no text retriever, K comes from corpus.k
    depth = data["retriever"].get("depth")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth <= 0):
        raise ArecallError(
            f"{origin}: retriever.depth: must be a positive integer or null, got {depth}"
        )
    return data


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


def default_config(overrides: list[str] | None = None) -> dict[str, Any]:
    """Compose conf/ with Hydra (optionally with overrides), as ``arecall run`` would.

    Examples
    --------
    >>> default_config(["retriever=sklearn_tfidf"])["retriever"]["name"]
    'sklearn_tfidf'
    """
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        composed = compose(config_name="config", overrides=list(overrides or []))
    container = OmegaConf.to_container(composed, resolve=True)
    assert isinstance(container, dict)
    return {str(k): v for k, v in container.items()}
