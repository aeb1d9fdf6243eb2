"""``profiles.grants`` and ``profiles.clearances`` can be set from every entry point, and count.

Any override of them, valid ones too, used to crash in OmegaConf (``'NoneType' object has no
attribute 'get'``: a typed mapping whose value is null cannot take a merge) in ``arecall run``,
``-m`` and ``dvc exp run -S`` alike. Now a valid override is the authorization the run measures
— checked against an ACL file granting the same documents, an independent route to the same
grants — and an invalid one is one line naming the key.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from arecall.pipeline.config import default_config

from tests.helpers import FAST_PROOF, dvc, snapshot_repo

pytestmark = pytest.mark.slow

QUIET = ("tracking.enabled=false", FAST_PROOF)
GRANTS = "profiles.grants={analyst:[analytics]}"


def _run(arecall, out: Path, *overrides: str) -> dict:
    proc = arecall("run", *QUIET, f"hydra.run.dir={out}", *overrides)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "metrics.json").read_text())


def _acl(out: Path) -> set[tuple[str, str]]:
    acl = pd.read_parquet(out / "data" / "corpus" / "acl.parquet")
    return set(zip(acl["principal"].astype(str), acl["doc_id"].astype(str), strict=True))


def test_the_overrides_compose_for_sweeps_and_help():
    cfg = default_config(
        ["profiles=clearance", GRANTS, "profiles.clearances={analyst:internal}"]
    ).params()
    assert cfg["profiles"]["grants"] == {"analyst": ["analytics"]}
    assert cfg["profiles"]["clearances"] == {"analyst": "internal"}
    plus = default_config(["profiles=domains", "+profiles.grants={analyst:[analytics]}"]).params()
    assert plus["profiles"]["grants"] == {"analyst": ["analytics"]}


def test_a_grants_override_measures_the_same_as_an_acl_file_granting_those_documents(
    tmp_path, arecall
):
    default = _run(arecall, tmp_path / "default", "profiles=domains")
    granted = _run(arecall, tmp_path / "granted", "profiles=domains", GRANTS)
    docs = pd.read_parquet(tmp_path / "granted" / "data" / "corpus" / "documents.parquet")
    analytics = sorted(docs.loc[docs["domain"] == "analytics", "doc_id"].astype(str))
    assert analytics  # the discovery corpus has the domain
    assert _acl(tmp_path / "granted") == {("analyst", d) for d in analytics}
    tsv = tmp_path / "acl.tsv"
    tsv.write_text("".join(f"{d}\tanalyst\n" for d in analytics))
    by_file = _run(arecall, tmp_path / "file", "profiles=acl_file", f"profiles.path={tsv}")
    assert granted["k"] == by_file["k"] and granted["pairs"] == by_file["pairs"]
    assert granted["pairs"] != default["pairs"]  # one principal instead of the corpus's four
    assert granted["k"] != default["k"]


def test_a_clearance_override_lowers_that_principals_grants_to_the_level(tmp_path, arecall):
    default = _run(arecall, tmp_path / "default", "profiles=clearance")
    lowered = _run(
        arecall,
        tmp_path / "lowered",
        "profiles=clearance",
        "profiles.clearances={analyst:internal}",
    )
    docs = pd.read_parquet(tmp_path / "lowered" / "data" / "corpus" / "documents.parquet")
    sensitivity = dict(zip(docs["doc_id"].astype(str), docs["sensitivity"], strict=True))
    before = {d for p, d in _acl(tmp_path / "default") if p == "analyst"}
    after = {d for p, d in _acl(tmp_path / "lowered") if p == "analyst"}
    assert after == {d for d in before if sensitivity[d] == "internal"}
    assert after < before  # the analyst held more than internal documents
    others = {(p, d) for p, d in _acl(tmp_path / "default") if p != "analyst"}
    assert {(p, d) for p, d in _acl(tmp_path / "lowered") if p != "analyst"} == others
    assert lowered["k"] != default["k"]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["profiles=domains", "profiles.grants={analyst:analytics}"],
            "profiles.grants.analyst: must be",
        ),
        (["profiles=domains", "profiles.grants={}"], "profiles.grants: must be null or a non-"),
        (
            ["profiles=domains", "+profiles.grants={x:[nope]}"],
            "profiles.grants.x[0]: unknown domain 'nope'",
        ),
        (
            ["profiles=clearance", "+profiles.clearances={external-auditor:top}"],
            "profiles.clearances.external-auditor: must be one of profiles.levels",
        ),
        (
            ["profiles=clearance", "profiles.clearances={analyst:[internal]}"],
            "profiles.clearances.analyst: must be",
        ),
    ],
)
def test_an_invalid_grants_or_clearances_override_is_one_line(
    tmp_path, overrides, expected, arecall
):
    out = tmp_path / "out"
    proc = arecall("run", *QUIET, f"hydra.run.dir={out}", *overrides)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("arecall: error: ") and expected in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert not (out / "metrics.json").exists()


@pytest.mark.long
def test_dvc_exp_run_sets_grants_and_measures_what_arecall_run_measures(tmp_path, arecall):
    work = snapshot_repo(tmp_path / "repo")
    overrides = ["profiles=domains", GRANTS, FAST_PROOF]
    proc = dvc(work, "exp", "run", *(f"-S{o}" for o in overrides))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    by_dvc = json.loads((work / "reports" / "metrics.json").read_text())
    by_run = _run(arecall, tmp_path / "run", *overrides)
    assert by_dvc["k"] == by_run["k"] and by_dvc["pairs"] == by_run["pairs"]
    # an invalid one: the first stage refuses it in its one line, naming params.yaml and the key
    proc = dvc(work, "exp", "run", "-Sprofiles=domains", "-Sprofiles.grants={analyst:analytics}")
    assert proc.returncode != 0
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("arecall: error: ")]
    assert errors == [
        "arecall: error: params.yaml: profiles.grants.analyst: must be a list of strings, "
        "got 'analytics'"
    ], proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected error" not in proc.stderr
