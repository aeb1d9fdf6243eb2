"""``--help`` and ``-h`` work on every ``arecall`` subcommand: exit 0, usage on stdout, no traceback.

``arecall run --help`` used to end in Hydra's MissingConfigException (``index/base_hnsw``: the
schemas were not in Hydra's ConfigStore on that route), exit 1. It now lists the config groups
with their options, as ``conf/`` holds them, and the default of each.
"""

from __future__ import annotations

import subprocess

import pytest
import yaml

from arecall.cli import COMMANDS
from arecall.pipeline.config import CONF_DIR

from tests.helpers import VENV_BIN


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_answers_help_with_its_usage_and_exit_0(command, flag, arecall):
    proc = arecall(command, flag)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith(f"usage: arecall {command}"), proc.stdout[:200]


def _defaults() -> dict[str, str]:
    """conf/config.yaml's defaults list: group (or group@package) -> option."""
    config = yaml.safe_load((CONF_DIR / "config.yaml").read_text(encoding="utf-8"))
    return {
        k: v for entry in config["defaults"] if isinstance(entry, dict) for k, v in entry.items()
    }


def test_run_help_lists_every_config_group_with_its_options_and_default(arecall):
    proc = arecall("run", "--help")
    assert proc.returncode == 0, proc.stderr
    block = proc.stdout.split("config groups", 1)[1].split("\n\n", 1)[0]
    lines = block.splitlines()[1:]
    defaults = _defaults()
    groups = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and any(p.glob("*.yaml")))
    assert groups  # corpus, evaluation, index, profiles, retriever, tracking
    for group in groups:
        (line,) = [ln for ln in lines if ln.strip().startswith(f"{group}:")]
        options = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
        if group == "corpus":  # the vector experiment's corpus, listed under its package
            options.remove("vectors")
        shown = [o.strip().rstrip("*") for o in line.split(":", 1)[1].split(",")]
        assert sorted(shown) == options, line
        assert f"{defaults[group]}*" in line, line  # the default is marked
    # the vector experiment's sections, composed from the same groups under their package
    for key in ("corpus@vector_search.corpus", "index@vector_search.index"):
        (line,) = [ln for ln in lines if ln.strip().startswith(f"{key}:")]
        assert f"{defaults[key]}*" in line, line
    # every setting with its default, as a run composes it
    assert "ks: [1, 3, 5, 10]" in proc.stdout
    assert "ef_search: 64" in proc.stdout


def test_run_help_shows_the_config_its_overrides_compose(arecall):
    proc = arecall("run", "retriever=bm25", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "k1: 1.5" in proc.stdout  # bm25's own settings, not tfidf's


def test_run_help_with_a_bad_override_is_one_line(arecall):
    proc = arecall("run", "retriever=nope", "--help")
    assert proc.returncode == 2
    assert proc.stderr.startswith("arecall: error: retriever=nope: no such retriever config")
    assert len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize("flag", ["--hydra-help", "--info", "--cfg=job"])
def test_hydras_own_flags_answer_without_a_traceback(flag, arecall):
    proc = arecall("run", flag)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "MissingConfigException" not in proc.stdout + proc.stderr


def test_the_console_script_answers_run_help():
    proc = subprocess.run(
        [str(VENV_BIN / "arecall"), "run", "-h"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: arecall run") and "Traceback" not in proc.stderr
