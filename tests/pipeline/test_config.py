"""params.yaml is the DVC config's composition, and every config option composes and is understood."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from arecall.core.errors import ArecallError
from arecall.data.authorization import MODELS
from arecall.data.sources import SOURCES
from arecall.pipeline.config import CONF_DIR, DVC_CONFIG, checked, default_config, load_params
from arecall.retrievers import RETRIEVERS

from tests.helpers import REQUIRED, ROOT


def test_params_yaml_is_the_composition_of_the_dvc_config():
    assert (
        yaml.safe_load((ROOT / "params.yaml").read_text())
        == default_config(config_name=DVC_CONFIG).params()
    )


def test_params_yaml_is_hydras_dump_of_the_composition_byte_for_byte():
    from omegaconf import OmegaConf

    header, _, body = (ROOT / "params.yaml").read_text().partition("\n")
    assert header.startswith("# Generated: ")
    assert body == OmegaConf.to_yaml(default_config(config_name=DVC_CONFIG).params())


def test_dvc_composes_params_from_the_dvc_config():
    from dvc.config import Config

    assert Config(dvc_dir=ROOT / ".dvc")["hydra"]["config_name"] == DVC_CONFIG


def test_the_vector_experiment_is_off_for_a_run_and_on_in_the_dvc_pipeline():
    # a text run neither waits for nor prints it; `dvc repro` regenerates the docs' table
    assert default_config().params()["vector_search"]["enabled"] is False
    dvc = default_config(config_name=DVC_CONFIG).params()
    assert dvc["vector_search"]["enabled"] is True
    assert {**dvc, "vector_search": {**dvc["vector_search"], "enabled": False}} == (
        default_config().params()
    )


def test_conf_at_the_top_level_is_the_packaged_conf():
    assert (ROOT / "conf").resolve() == CONF_DIR


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


# corpus=vectors is the vector_search section's corpus (arecall.vector generates it), not a text
# collection: as the text pipeline's corpus it is refused while composing
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
        assert option in registry
        if option in VECTOR_ONLY:
            cfg = default_config().params()
            assert cfg["vector_search"][group]["name"] == option
            continue
        dense = ["retriever=dense_lsa"] if group == "index" and option != "none" else []
        cfg = default_config(
            [f"{group}={option}", *REQUIRED.get((group, option), []), *dense]
        ).params()
        assert cfg[group]["name"] == option
    assert set(registry) == set(_options(group))


def test_corpus_vectors_as_the_text_corpus_is_refused_in_one_line_naming_vector_search():
    with pytest.raises(ArecallError, match=r"^corpus=vectors is .*vector_search") as info:
        default_config(["corpus=vectors", "index=hnsw"])
    assert "\n" not in str(info.value)


def test_the_vector_experiment_is_composed_from_the_groups_under_vector_search():
    cfg = default_config(
        ["index@vector_search.index=exact", "vector_search.corpus.n_docs=500"]
    ).params()
    assert cfg["vector_search"]["index"]["name"] == "exact"
    assert cfg["vector_search"]["corpus"]["n_docs"] == 500
    assert cfg["index"]["name"] == "none"  # the text pipeline's own index is untouched
    with pytest.raises(ArecallError, match=r"vector_search.index.name: must be one of exact, hnsw"):
        default_config(["index@vector_search.index=none"])


def test_dvc_composes_conf_with_hydra():
    text = (ROOT / ".dvc" / "config").read_text()
    assert "[hydra]" in text and "enabled = true" in text


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"evaluation": {"ks": [1, 0]}}, "evaluation.ks[1]"),
        ({"evaluation": {"ks": []}}, "evaluation.ks"),
        ({"evaluation": {"ks": [1], "placements": ["post"]}}, "evaluation.placements"),
        ({"retriever": {"name": "tfidf", "depth": -3}}, "retriever.depth"),
    ],
)
def test_bad_values_are_refused_naming_the_field(patch, message):
    cfg = {**default_config().params(), **patch}
    with pytest.raises(ArecallError, match=message.replace("[", r"\[").replace("]", r"\]")):
        checked(cfg)


def test_invalid_yaml_names_the_file_and_line(tmp_path: Path):
    bad = tmp_path / "params.yaml"
    bad.write_text("corpus:\n  name: [unclosed\n")
    with pytest.raises(ArecallError, match=r"params.yaml: line \d+: invalid YAML"):
        load_params(bad)


def test_bm25s_writes_no_debug_lines_into_runs():
    import logging

    import arecall.retrievers.bm25  # noqa: F401 (the import is what sets bm25s's level)

    assert not logging.getLogger("bm25s").isEnabledFor(logging.DEBUG)
