"""params.yaml is conf/'s composition, and every config option composes and is understood."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from arecall.core.errors import ArecallError
from arecall.data.authorization import MODELS
from arecall.data.sources import SOURCES
from arecall.pipeline.config import CONF_DIR, checked, default_config, load_params
from arecall.retrievers import RETRIEVERS
from test_typed_config import REQUIRED

from conftest import ROOT


def test_params_yaml_is_the_composition_of_conf_defaults():
    assert yaml.safe_load((ROOT / "params.yaml").read_text()) == default_config()


def test_params_yaml_is_hydras_dump_of_the_composition_byte_for_byte():
    from omegaconf import OmegaConf

    header, _, body = (ROOT / "params.yaml").read_text().partition("\n")
    assert header.startswith("# Generated: ")
    assert body == OmegaConf.to_yaml(default_config())


def test_conf_at_the_top_level_is_the_packaged_conf():
    assert (ROOT / "conf").resolve() == CONF_DIR


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


# corpus=vectors is not a text collection: the vector stage generates it (arecall.vector)
VECTOR_ONLY = {"vectors"}


@pytest.mark.parametrize(
    ("group", "registry"),
    [
        ("corpus", set(SOURCES) | VECTOR_ONLY),
        ("retriever", set(RETRIEVERS)),
        ("profiles", set(MODELS)),
        ("index", {"none", "exact", "hnsw"}),
    ],
)
def test_every_group_option_composes_and_names_a_registered_implementation(group, registry):
    for option in _options(group):
        cfg = default_config([f"{group}={option}", *REQUIRED.get((group, option), [])])
        assert cfg[group]["name"] == option
        assert option in registry
    assert set(registry) == set(_options(group))


def test_dvc_composes_conf_with_hydra():
    text = (ROOT / ".dvc" / "config").read_text()
    assert "[hydra]" in text and "enabled = true" in text


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"evaluation": {"ks": [1, 0], "placements": ["post", "pre"]}}, "evaluation.ks[1]"),
        ({"evaluation": {"ks": [], "placements": ["post", "pre"]}}, "evaluation.ks"),
        ({"evaluation": {"ks": [1], "placements": ["post"]}}, "evaluation.placements"),
        ({"retriever": {"name": "tfidf", "depth": -3}}, "retriever.depth"),
    ],
)
def test_bad_values_are_refused_naming_the_field(patch, message):
    cfg = {**default_config(), **patch}
    with pytest.raises(ArecallError, match=message.replace("[", r"\[").replace("]", r"\]")):
        checked(cfg)


def test_invalid_yaml_names_the_file_and_line(tmp_path: Path):
    bad = tmp_path / "params.yaml"
    bad.write_text("corpus:\n  name: [unclosed\n")
    with pytest.raises(ArecallError, match=r"params.yaml: line \d+: invalid YAML"):
        load_params(bad)
