"""Each config rule is checked once, by the schema, before any stage runs (issue 37, knot 5).

The code that runs a section takes it typed and checks none of it again. For every rule that
used to be checked a second time (in a source, an authorization model, the rank stage or the
vector experiment), the one remaining check still fires: on params.yaml as DVC's stages read it,
as one line naming the file, the key and what is wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from arecall.core.errors import ArecallError
from arecall.pipeline.config import default_config, load_params

#: section patch -> the one line the config check gives (after "params.yaml: ").
REMOVED_DUPLICATES = {
    "beir's required path (was also checked in data/sources/beir.py)": (
        {"corpus": {"name": "beir"}},
        "corpus.path: required for corpus=beir (a BEIR directory), got null",
    ),
    "acl_file's required path (was also checked in data/authorization/acl_file.py)": (
        {"profiles": {"name": "acl_file"}},
        "profiles.path: required for profiles=acl_file (a TSV file), got null",
    ),
    "clearance's distinct levels (was also checked in data/authorization/clearance.py)": (
        {"profiles": {"name": "clearance", "levels": ["internal", "internal"]}},
        "profiles.levels: must be a list of distinct level names, lowest first, "
        "got ['internal', 'internal']",
    ),
    "clearance's clearances mapping (was also checked in data/authorization/clearance.py)": (
        {"profiles": {"name": "clearance", "clearances": ["analyst"]}},
        "profiles.clearances: must be null or a mapping, got ['analyst']",
    ),
    "domains' non-empty grants (was also checked in data/authorization/helpers.py)": (
        {"profiles": {"name": "domains", "grants": {}}},
        "profiles.grants: must be null or a non-empty mapping principal -> list of domains, got {}",
    ),
    "random's selectivity (was also checked in data/authorization/random.py)": (
        {"profiles": {"name": "random", "selectivity": 0}},
        "profiles.selectivity: must be a number in (0, 1], got 0",
    ),
    "random's principals (was also checked in data/authorization/random.py)": (
        {"profiles": {"name": "random", "n_principals": 0}},
        "profiles.n_principals: must be a positive integer, got 0",
    ),
    "random's seed (was also checked in data/authorization/random.py)": (
        {"profiles": {"name": "random", "seed": -1}},
        "profiles.seed: must be a non-negative integer, got -1",
    ),
    "corpus' principals list (was also checked in data/authorization/corpus.py)": (
        {"profiles": {"name": "corpus", "principals": "analyst"}},
        "profiles.principals: must be null or a list of strings, got 'analyst'",
    ),
    "the vector experiment's index (was also checked in pipeline/vector_search.py)": (
        {"vector_search": {"index": {"name": "none"}}},
        "vector_search.index.name: must be one of exact, hnsw, got 'none'",
    ),
    "a dense retriever under an index (was also checked in pipeline/vector_search.py)": (
        {"index": {"name": "hnsw"}},
        "index.name: index=hnsw needs a retriever with dense embeddings "
        "(retriever=dense_lsa|embeddings|model2vec), not retriever=tfidf",
    ),
    "the depth against the largest K (was also checked in pipeline/stages/rank.py)": (
        {"retriever": {"name": "tfidf", "depth": 3}},
        "retriever.depth: must be null or at least the largest K (evaluation.ks: 10) — top-K "
        "metrics need K ranked documents per query, got 3",
    ),
}


@pytest.mark.parametrize("rule", sorted(REMOVED_DUPLICATES))
def test_the_one_remaining_check_of_a_rule_fires_in_one_line(rule: str, tmp_path: Path) -> None:
    patch, message = REMOVED_DUPLICATES[rule]
    params = default_config().params()
    for section, value in patch.items():
        params[section] = {**params[section], **value} if section == "vector_search" else value
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    with pytest.raises(ArecallError) as err:
        load_params(path)
    assert str(err.value) == f"{path}: {message}"


def test_a_checked_section_is_taken_as_it_is_not_checked_again() -> None:
    from arecall.core.schema import select, validate
    from arecall.data.authorization import MODELS
    from arecall.data.authorization.schema import RandomProfiles

    section = default_config(["profiles=random"]).profiles
    assert validate(RandomProfiles, section, "profiles") is section
    assert select(MODELS.schemas(), section, "profiles", "authorization model") is section
