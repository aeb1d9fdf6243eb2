"""``arecall run --help``: the usage, the config groups with their options, and the settings.

Hydra's own help lists the ConfigStore's schema entries (``base_hnsw``…) beside the options and
shows the config unresolved; this one lists the options a user can choose (``conf/``'s YAML
files, the same list `arecall.cli.run.check_group_choices` accepts), marks conf/'s defaults, and
prints the composition the given overrides make, checked as a run checks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

__all__ = ["group_options", "run_help"]

USAGE = "usage: arecall run [OVERRIDE ...] [-m] [--cfg job] [--info] [--hydra-help]\n"

_ABOUT = """
Run the whole pipeline (generate, rank, filter, score, prove, report, vectors) in this process
for a Hydra-composed config and log it to MLflow. Outputs go to hydra.run.dir; -m sweeps every
combination of comma-separated choices, one run each, nested under one MLflow parent run.
"""

_EXAMPLES = """
examples:
  arecall run retriever=bm25 'evaluation.ks=[1,5,10]'
  arecall run corpus=seed_json corpus.path=DIR
  arecall run profiles=domains 'profiles.grants={analyst:[analytics]}'
  arecall run -m retriever=tfidf,bm25,dense_lsa

Hydra's own flags: --cfg job (print the composed config), --info, --hydra-help.
"""

#: A group's option that is not a choice of the text pipeline: corpus=vectors is the vector
#: experiment's corpus, composed under vector_search (arecall.pipeline.schema.VECTORS_REFUSAL).
_NOT_A_TEXT_CHOICE = {"corpus": ("vectors",)}


def group_options(conf_dir: Path) -> dict[str, list[str]]:
    """Each config group of ``conf_dir`` and its options (the group's YAML files), sorted.

    Examples
    --------
    >>> from arecall.pipeline.config import CONF_DIR
    >>> group_options(CONF_DIR)["index"]
    ['exact', 'hnsw', 'none']
    """
    return {
        group.name: sorted(p.stem for p in group.glob("*.yaml"))
        for group in sorted(conf_dir.iterdir())
        if group.is_dir() and any(group.glob("*.yaml"))
    }


def _defaults(conf_dir: Path) -> dict[str, str]:
    """conf/config.yaml's defaults list: ``group`` or ``group@package`` -> option."""
    config = yaml.safe_load((conf_dir / "config.yaml").read_text(encoding="utf-8"))
    return {
        str(k): str(v)
        for entry in config.get("defaults", [])
        if isinstance(entry, dict)
        for k, v in entry.items()
    }


def _groups_block(conf_dir: Path) -> str:
    from arecall.pipeline.schema import COMPOSED

    defaults = _defaults(conf_dir)
    lines = ["config groups (group=option; * marks the default):"]
    for group, options in group_options(conf_dir).items():
        chosen = [o for o in options if o not in _NOT_A_TEXT_CHOICE.get(group, ())]
        marked = [f"{o}*" if defaults.get(group) == o else o for o in chosen]
        lines.append(f"  {group}: {', '.join(marked)}")
    for section, parts in COMPOSED.items():
        for key, (group, allowed) in parts.items():
            name = f"{group}@{section}.{key}"
            marked = [f"{o}*" if defaults.get(name) == o else o for o in allowed]
            lines.append(f"  {name}: {', '.join(marked)}")
    return "\n".join(lines) + "\n"


def _settings_block(overrides: Sequence[str]) -> str:
    from arecall.pipeline.config import default_config

    config = default_config(list(overrides)).params()
    body = yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=100)
    title = "settings (key=value), as " + (
        f"{' '.join(overrides)} composes them:" if overrides else "conf/ composes them:"
    )
    return title + "\n" + "".join(f"  {line}\n" for line in body.splitlines())


def run_help(argv: Sequence[str]) -> str | None:
    """The help text when ``argv`` asks for it (``-h``/``--help``), else None.

    The overrides given with it are composed and checked, so the settings shown are the ones
    that run would use; a bad override is the one-line error a run would give.

    Examples
    --------
    >>> run_help(["retriever=bm25"]) is None
    True
    >>> print(run_help(["--help"]).splitlines()[0])
    usage: arecall run [OVERRIDE ...] [-m] [--cfg job] [--info] [--hydra-help]
    """
    from hydra._internal.utils import get_args_parser

    from arecall.cli.run import check_group_choices
    from arecall.pipeline.config import CONF_DIR

    try:
        args = get_args_parser().parse_args(list(argv))
    except SystemExit:  # argparse's own usage error: Hydra's run reports it
        return None
    if not args.help:
        return None
    overrides = list(args.overrides)
    check_group_choices(overrides, CONF_DIR)
    return (
        USAGE
        + _ABOUT
        + "\n"
        + _groups_block(CONF_DIR)
        + "\n"
        + _settings_block(overrides)
        + _EXAMPLES
    )
