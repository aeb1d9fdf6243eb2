"""Typed configuration: every bad value is one line naming origin and key, before any stage runs.

The same schema checks ``arecall run`` (Hydra's composition, the override named as origin) and
``params.yaml`` (the DVC stages' `load_params`, the file named as origin).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from arecall.cli import main
from arecall.core.errors import ArecallError
from arecall.pipeline.config import CONF_DIR, default_config, load_params
from arecall.pipeline.schema import GROUPS

from tests.helpers import REQUIRED, ROOT

# (overrides, dotted key, what the message says)
BAD = [
    (["vector_search.corpus.dims=abc"], "vector_search.corpus.dims", "got 'abc'"),
    (
        ["vector_search.corpus.selectivities=[abc]"],
        "vector_search.corpus.selectivities[0]",
        "got 'abc'",
    ),
    (
        ["vector_search.index.target_recall=abc"],
        "vector_search.index.target_recall",
        "got 'abc'",
    ),
    (
        ["vector_search.index.confidence=1.2"],
        "vector_search.index.confidence",
        "must be a number in [0.5, 1), got 1.2",
    ),
    (
        ["index=exact", "retriever=dense_lsa", "index.confidence=0.3"],
        "index.confidence",
        "must be a number in [0.5, 1), got 0.3",
    ),
    (["vector_search.corpus.k=2.5"], "vector_search.corpus.k", "got 2.5"),
    (["retriever.depth=0"], "retriever.depth", "must be a positive integer, got 0"),
    (["evaluation.ks=[0]"], "evaluation.ks[0]", "must be a positive integer, got 0"),
    (["+retriever.bogus=1"], "retriever.bogus", "unknown key"),
]


@pytest.mark.parametrize(("overrides", "key", "what"), BAD, ids=[b[0][-1] for b in BAD])
def test_arecall_run_refuses_a_bad_value_in_one_line_and_writes_nothing(
    tmp_path, capsys, overrides, key, what
):
    out = tmp_path / "out"
    try:
        code = main(["run", *overrides, f"hydra.run.dir={out}"])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"arecall: error: {overrides[-1]}: {key}: "), lines[0]
    assert what in lines[0] and "Traceback" not in err
    assert not out.exists()


def _params_with(tmp_path: Path, overrides: list[str]) -> Path:
    """params.yaml as DVC would write it for ``overrides``, with the last value patched raw."""
    *choices, last = overrides
    data = default_config(choices).params()
    key, _, raw = last.lstrip("+").partition("=")
    *path, leaf = key.split(".")
    node = data
    for part in path:
        node = node[part]
    node[leaf] = yaml.safe_load(raw)
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


@pytest.mark.parametrize(("overrides", "key", "what"), BAD, ids=[b[0][-1] for b in BAD])
def test_params_yaml_refuses_the_same_bad_value_naming_the_file(tmp_path, overrides, key, what):
    p = _params_with(tmp_path, overrides)
    with pytest.raises(ArecallError) as err:
        load_params(p)
    text = str(err.value)
    assert text.startswith(f"{p}: {key}: ") and what in text and "\n" not in text, text


def test_a_float_k_is_refused_not_truncated(tmp_path):
    p = _params_with(tmp_path, ["vector_search.corpus.k=2.5"])
    with pytest.raises(ArecallError, match=r"corpus\.k: must be a positive integer, got 2\.5"):
        load_params(p)


def test_an_unknown_section_and_a_bad_option_name_are_refused(tmp_path):
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump({**data, "extra": {"a": 1}}))
    with pytest.raises(ArecallError, match=r"params.yaml: extra: unknown config section"):
        load_params(p)
    data["retriever"]["name"] = "bogus"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ArecallError, match=r"retriever.name: unknown retriever .*got 'bogus'"):
        load_params(p)


# paths the options that read files require


def _options() -> list[tuple[str, str]]:
    return [
        (group, p.stem)
        for group in sorted(GROUPS)
        for p in sorted((CONF_DIR / group).glob("*.yaml"))
    ]


def test_every_yaml_option_has_a_schema_and_every_schema_a_yaml_option():
    assert set(_options()) == {(g, o) for g, options in GROUPS.items() for o in options}


#: what an option needs of the other groups to compose (a vector index: dense embeddings)
COMPANIONS = {
    ("index", "exact"): ["retriever=dense_lsa"],
    ("index", "hnsw"): ["retriever=dense_lsa"],
}


@pytest.mark.parametrize(("group", "option"), _options())
def test_every_option_composes_from_its_schema_and_validates(group, option):
    needs = [*REQUIRED.get((group, option), []), *COMPANIONS.get((group, option), [])]
    if (group, option) == ("corpus", "vectors"):  # the vector experiment's corpus only
        cfg = default_config().params()
        section = cfg["vector_search"]["corpus"]
    else:
        cfg = default_config([f"{group}={option}", *needs]).params()
        section = cfg[group]
    schema = GROUPS[group][option]
    assert set(section) == {f.name for f in dataclasses.fields(schema)}
    if "name" in section:
        assert section["name"] == option


def test_corpus_vectors_for_the_text_pipeline_is_one_line_pointing_at_vector_search():
    with pytest.raises(ArecallError, match="vector_search") as err:
        default_config(["corpus=vectors"])
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("group", "option"), sorted(REQUIRED))
def test_a_required_path_left_null_is_refused_at_composition(group, option):
    key = REQUIRED[(group, option)][0].split("=")[0]  # the first setting the option requires
    with pytest.raises(ArecallError, match=rf"{re.escape(key)}: required"):
        default_config([f"{group}={option}"])


def test_the_yaml_options_repeat_no_value_of_the_schema():
    for group, option in _options():
        text = yaml.safe_load((CONF_DIR / group / f"{option}.yaml").read_text())
        expected = {"defaults": [f"base_{option}", "_self_"]}
        if (group, option) == ("corpus", "vectors"):  # refused outside vector_search
            expected["name"] = "${arecall.vector_search_only:}"
        assert text == expected, (group, option)
