"""Authorization models: each grants exactly what its rule says, deny by default, errors named."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from arecall.core.errors import ArecallError
from arecall.data.authorization import LEVELS, MODELS, apply_profiles, principal_domains, read_acl
from arecall.data.collection import Collection
from arecall.data.sources import load_corpus
from arecall.pipeline.config import default_config
from arecall.pipeline.run import run_in_memory

from tests.helpers import assert_proved_on_every_pair

SYNTH = {"name": "synthetic", "seed": 5, "n_domains": 6, "docs_per_domain": 30, "n_principals": 7}


@pytest.fixture(scope="module")
def discovery() -> Collection:
    return load_corpus({"name": "discovery"})


@pytest.fixture(scope="module")
def synthetic() -> Collection:
    return load_corpus(SYNTH)


def _pairs(c: Collection) -> set[tuple[str, str]]:
    return set(zip(c.acl["principal"].astype(str), c.acl["doc_id"].astype(str), strict=True))


def _one_line_error(fn, *args) -> str:
    with pytest.raises(ArecallError) as err:
        fn(*args)
    text = str(err.value)
    assert "\n" not in text, text
    return text


def test_all_models_are_registered():
    assert set(MODELS) == {"corpus", "open", "domains", "clearance", "random", "acl_file"}


# -- domains -------------------------------------------------------------------------------------


def test_domains_by_default_gives_back_the_seed_profiles_of_the_discovery_corpus(discovery):
    held = principal_domains(discovery)
    assert held["external-auditor"] == ["quality"]
    assert held["clinical-reviewer"] == ["analytics", "clinical"]
    assert _pairs(apply_profiles(discovery, {"name": "domains"})) == _pairs(discovery)


def test_domains_by_default_uses_the_declared_domains_column(synthetic):
    out = apply_profiles(synthetic, {"name": "domains"})
    assert _pairs(out) == _pairs(synthetic)
    assert out.principals["principal"].tolist() == synthetic.principals["principal"].tolist()


def test_a_partial_grant_never_widens_into_a_whole_domain(discovery):
    acl = discovery.acl[discovery.acl["doc_id"] != "quality-complaints"]
    partial = Collection.build(
        documents=discovery.documents,
        queries=discovery.queries,
        qrels=discovery.qrels,
        principals=discovery.principals,
        acl=acl,
    )
    assert "quality" not in principal_domains(partial)["analyst"]
    out = apply_profiles(partial, {"name": "domains"})
    assert not any(d.startswith("quality-") for p, d in _pairs(out) if p == "analyst")


def test_domains_from_the_config_grant_exactly_those_domains(discovery):
    grants = {"alice": ["clinical"], "bob": ["supply", "quality"], "carol": []}
    out = apply_profiles(discovery, {"name": "domains", "grants": grants})
    assert out.principals["principal"].tolist() == ["alice", "bob", "carol"]
    domain = dict(zip(discovery.doc_ids, discovery.documents["domain"], strict=True))
    expected = {(p, d) for p, ds in grants.items() for d in discovery.doc_ids if domain[d] in ds}
    assert _pairs(out) == expected
    assert out.acl_matrix().toarray()[2].sum() == 0, "a principal with no domains sees nothing"


def test_an_unknown_domain_is_refused_naming_the_entry(discovery):
    text = _one_line_error(
        apply_profiles, discovery, {"name": "domains", "grants": {"alice": ["clinical", "nope"]}}
    )
    assert text.startswith("profiles.grants.alice[1]: unknown domain 'nope'"), text


def test_domains_needs_a_domain_column():
    c = load_corpus({"name": "discovery"})
    bare = Collection(
        documents=c.documents.drop(columns="domain"),
        queries=c.queries,
        qrels=c.qrels,
        principals=c.principals,
        acl=c.acl,
    )
    assert "no 'domain' column" in _one_line_error(apply_profiles, bare, {"name": "domains"})


# -- clearance -----------------------------------------------------------------------------------


def test_clearance_grants_iff_domain_held_and_sensitivity_at_most_clearance(synthetic):
    out = apply_profiles(synthetic, {"name": "clearance"})
    rank = {name: i for i, name in enumerate(LEVELS)}
    docs = synthetic.documents
    expected = set()
    for p, clearance, held in synthetic.principals[["principal", "clearance", "domains"]].values:
        for d, domain, sensitivity in docs[["doc_id", "domain", "sensitivity"]].values:
            if domain in held.split(",") and rank[sensitivity] <= rank[clearance]:
                expected.add((p, d))
    assert _pairs(out) == expected
    assert expected < _pairs(synthetic), "clearance only ever removes domain grants"


def test_clearance_on_discovery_denies_the_internal_auditor_the_confidential_quality_domain(
    discovery,
):
    out = apply_profiles(discovery, {"name": "clearance"})
    assert not any(p == "external-auditor" for p, _ in _pairs(out))
    others = {(p, d) for p, d in _pairs(discovery) if p != "external-auditor"}
    assert _pairs(out) == others


def test_clearances_and_levels_from_the_config(discovery):
    cfg = {
        "name": "clearance",
        "levels": ["internal", "confidential", "restricted"],
        "clearances": {"clinical-reviewer": "internal", "external-auditor": "restricted"},
    }
    out = apply_profiles(discovery, cfg)
    granted = _pairs(out)
    assert ("external-auditor", "quality-deviations") in granted
    assert not any(p == "clinical-reviewer" for p, _ in granted)  # clinical/analytics > internal


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (
            {"clearances": {"analyst": "secret"}},
            "profiles.clearances.analyst: must be one of profiles.levels",
        ),
        ({"levels": ["internal", "internal"]}, "profiles.levels: must be a list of distinct"),
        ({"levels": ["internal", "confidential"]}, "sensitivity 'restricted' of document"),
        ({"grants": {"zed": ["clinical"]}}, "profiles.clearances.zed: principal 'zed' has no"),
        ({"clearances": ["analyst"]}, "profiles.clearances: must be null or a mapping"),
    ],
)
def test_bad_clearance_config_is_refused_naming_the_field(discovery, cfg, message):
    text = _one_line_error(apply_profiles, discovery, {"name": "clearance", **cfg})
    assert message in text, text


# -- random --------------------------------------------------------------------------------------


def test_random_acl_density_is_the_selectivity():
    c = load_corpus({**SYNTH, "docs_per_domain": 4000})
    for s in (0.05, 0.3, 1.0):
        acl = apply_profiles(c, {"name": "random", "selectivity": s, "n_principals": 5})
        density = acl.acl_matrix().toarray().mean(axis=1)
        assert np.allclose(density, s, atol=0.01), (s, density)
    assert list(acl.principal_names) == ["r0", "r1", "r2", "r3", "r4"]


def test_random_is_deterministic_in_its_seed(synthetic):
    cfg = {"name": "random", "selectivity": 0.2, "n_principals": 3, "seed": 1}
    a, b = apply_profiles(synthetic, cfg), apply_profiles(synthetic, cfg)
    c = apply_profiles(synthetic, {**cfg, "seed": 2})
    assert a.acl.equals(b.acl) and not a.acl.equals(c.acl)


@pytest.mark.parametrize("s", [0, 0.0, -0.1, 1.5, True, "0.1"])
def test_selectivity_outside_0_1_is_refused(synthetic, s):
    text = _one_line_error(apply_profiles, synthetic, {"name": "random", "selectivity": s})
    assert text.startswith("profiles.selectivity: must be a number in (0, 1]"), text


def test_random_n_principals_must_be_positive(synthetic):
    text = _one_line_error(apply_profiles, synthetic, {"name": "random", "n_principals": 0})
    assert text.startswith("profiles.n_principals: must be a positive integer"), text


def test_random_acl_for_200k_documents_and_100_principals_takes_seconds():
    n = 200_000
    ids = pd.Series([f"d{i:06d}" for i in range(n)])
    big = Collection(
        documents=pd.DataFrame({"doc_id": ids, "text": "x"}),
        queries=pd.DataFrame({"query_id": ["q"], "text": ["x"]}),
        qrels=pd.DataFrame({"query_id": ["q"], "doc_id": ["d000000"], "relevance": [1.0]}),
        principals=pd.DataFrame({"principal": ["p"]}),
        acl=pd.DataFrame({"principal": [], "doc_id": []}),
    )
    start = time.process_time()
    out = apply_profiles(big, {"name": "random", "selectivity": 0.25, "n_principals": 100})
    matrix = out.acl_matrix()
    assert time.process_time() - start < 15
    assert matrix.shape == (100, n) and abs(matrix.nnz / (100 * n) - 0.25) < 0.001


# -- acl_file ------------------------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_acl_file_grants_exactly_its_lines_and_denies_the_rest(tmp_path, discovery):
    acl = _write(
        tmp_path / "acl.tsv",
        "doc_id\tprincipal\nclinical-dose-cohorts\tann\nsupply-lot-inventory\tbob\n"
        "\nclinical-dose-cohorts\tbob\n",
    )
    out = apply_profiles(discovery, {"name": "acl_file", "path": str(acl)})
    assert list(out.principal_names) == ["ann", "bob"]
    assert _pairs(out) == {
        ("ann", "clinical-dose-cohorts"),
        ("bob", "supply-lot-inventory"),
        ("bob", "clinical-dose-cohorts"),
    }
    assert out.acl_matrix().sum() == 3, "every other (principal, document) is denied"


def test_blank_lines_crlf_and_a_header_do_not_change_what_an_acl_file_grants(tmp_path, discovery):
    lines = ["clinical-dose-cohorts\tann", "supply-lot-inventory\tbob", "quality-complaints\tann"]
    plain = _write(tmp_path / "plain.tsv", "\n".join(lines) + "\n")
    messy = _write(tmp_path / "messy.tsv", "doc_id\tprincipal\r\n\r\n" + "\r\n\r\n".join(lines))
    a = read_acl(plain, discovery.documents["doc_id"])
    b = read_acl(messy, discovery.documents["doc_id"])
    assert a[0].equals(b[0]) and a[1].equals(b[1])
    assert len(a[1]) == 3


def test_a_grant_to_a_group_is_a_grant_to_each_member(tmp_path, discovery):
    acl = _write(tmp_path / "acl.tsv", "clinical-dose-cohorts\tstaff\nsupply-lot-inventory\tann\n")
    groups = _write(tmp_path / "groups.tsv", "principal\tgroup\nann\tstaff\ncid\tstaff\n")
    out = apply_profiles(discovery, {"name": "acl_file", "path": str(acl), "groups": str(groups)})
    assert list(out.principal_names) == ["ann", "cid"]
    assert _pairs(out) == {
        ("ann", "clinical-dose-cohorts"),
        ("cid", "clinical-dose-cohorts"),
        ("ann", "supply-lot-inventory"),
    }
    assert out.principals["groups"].tolist() == ["staff", "staff"]


@pytest.mark.parametrize(
    ("acl", "groups", "message"),
    [
        (
            "clinical-dose-cohorts\tann\nghost\tann\n",
            None,
            "acl.tsv: line 2: 'ghost' is not a document id",
        ),
        (
            "clinical-dose-cohorts\tann\textra\n",
            None,
            "acl.tsv: line 1: expected 2 tab-separated fields",
        ),
        ("clinical-dose-cohorts ann\n", None, "acl.tsv: line 1: expected 2 tab-separated fields"),
        ("\n\nclinical-dose-cohorts\t\n", None, "acl.tsv: line 3: empty principal"),
        (
            "clinical-dose-cohorts\tstaff\n",
            "ann\tstaff\nstaff\tall\n",
            "groups.tsv: line 2: 'staff' is both a principal and a group",
        ),
        (
            "clinical-dose-cohorts\tstaff\n",
            "ann\n",
            "groups.tsv: line 1: expected 2 tab-separated fields",
        ),
    ],
)
def test_bad_acl_files_are_refused_naming_file_and_line(tmp_path, discovery, acl, groups, message):
    cfg = {"name": "acl_file", "path": str(_write(tmp_path / "acl.tsv", acl))}
    if groups is not None:
        cfg["groups"] = str(_write(tmp_path / "groups.tsv", groups))
    text = _one_line_error(apply_profiles, discovery, cfg)
    assert message in text, text


def test_acl_file_needs_a_path_and_an_existing_file(tmp_path, discovery):
    assert _one_line_error(apply_profiles, discovery, {"name": "acl_file"}).startswith(
        "profiles.path: required"
    )
    missing = tmp_path / "none.tsv"
    text = _one_line_error(apply_profiles, discovery, {"name": "acl_file", "path": str(missing)})
    assert text == f"{missing}: file not found"


def test_read_acl_returns_categorical_columns_over_the_collection_ids(tmp_path):
    principals, acl = read_acl(_write(tmp_path / "a.tsv", "b\tp\n"), ["a", "b", "c"])
    assert principals["principal"].tolist() == ["p"]
    assert acl["doc_id"].cat.categories.tolist() == ["a", "b", "c"]


# -- end to end ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        ["profiles=domains"],
        ["profiles=clearance"],
        ["corpus=synthetic", "profiles=random", "profiles.selectivity=0.5"],
        ["profiles=acl_file"],
    ],
    ids=["domains", "clearance", "random", "acl_file"],
)
def test_the_pipeline_runs_end_to_end_on_each_model(tmp_path, overrides):
    if overrides == ["profiles=acl_file"]:
        acl = _write(tmp_path / "acl.tsv", "clinical-dose-cohorts\tann\nquality-deviations\tann\n")
        overrides = [*overrides, f"profiles.path={acl}"]
    out = run_in_memory(default_config([*overrides, "evaluation.proof.max_examples=5"]))
    assert_proved_on_every_pair(out)
    if "profiles=clearance" in overrides:
        # the auditor loses quality (confidential > internal): fewer authorized relevant pairs
        corpus = run_in_memory(default_config(["evaluation.proof.max_examples=5"]))
        assert out["metrics"]["k"]["5"]["n_nonempty"] < corpus["metrics"]["k"]["5"]["n_nonempty"]
