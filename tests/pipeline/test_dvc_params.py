"""Every config key reaches DVC's params of exactly the stages that read it.

Derived from the code, not a hand list: each stage function runs on a small configuration wrapped
so that every key it reads is recorded, and the dotted keys it read must be exactly what dvc.yaml
declares as that stage's params (a key read but not declared would not rerun the stage when it
changes; a key declared but not read would rerun it for nothing). Then every option of every
config group (from the ConfigStore's `GROUPS`) is composed, and each key it sets must be declared
by some stage, so ``dvc exp run -S group=option`` reruns what it affects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from arecall.core.errors import ArecallError
from arecall.pipeline.config import CONF_DIR, default_config
from arecall.pipeline.layout import Layout
from arecall.pipeline.schema import COMPOSED, GROUPS, SECTIONS, ExperimentConfig

from tests.helpers import REQUIRED, ROOT

DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


_RECORDING: dict[type, type] = {}


def _recording_class(cls: type) -> type:
    """A subclass of the schema ``cls`` whose field reads are recorded (``isinstance`` holds, so
    the code under test takes it for the checked section it is)."""
    if cls not in _RECORDING:

        def __getattribute__(self: Any, name: str) -> Any:
            value = object.__getattribute__(self, name)
            fields = object.__getattribute__(self, "__dataclass_fields__")
            if name in fields and not dataclasses.is_dataclass(value):  # a section records its own
                reads, prefix = object.__getattribute__(self, "_recorded")
                reads.add(f"{prefix}{name}")
            return value

        _RECORDING[cls] = type(cls.__name__, (cls,), {"__getattribute__": __getattribute__})
    return _RECORDING[cls]


def recording(obj: Any, reads: set[str], prefix: str = "") -> Any:
    """``obj``, a checked config (or section), whose every leaf read adds its dotted key to
    ``reads`` (``dataclasses.asdict``, which reads every field, records them all)."""
    made = object.__new__(_recording_class(type(obj)))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            value = recording(value, reads, f"{prefix}{f.name}.")
        object.__setattr__(made, f.name, value)
    object.__setattr__(made, "_recorded", (reads, prefix))
    return made


def _small(overrides: list[str]) -> ExperimentConfig:
    return default_config(
        [
            "evaluation.proof.max_examples=3",
            "evaluation.significance.resamples=50",
            "vector_search.corpus.n_docs=200",
            "vector_search.corpus.dims=8",
            "vector_search.corpus.n_queries=4",
            "vector_search.corpus.selectivities=[0.5]",
            *overrides,
        ]
    )


# the configurations each stage is instrumented on: the union of what it reads on each
CONFIGS = {"default": [], "dense index": ["index=exact", "retriever=dense_lsa"]}


@cache
def _reads(tmp: Path) -> dict[str, set[str]]:
    from arecall.pipeline.run import STAGES
    from arecall.pipeline.stages.vectors import vector_search

    stages = {**STAGES, "vectors": vector_search}
    reads: dict[str, set[str]] = {name: set() for name in stages}
    for label, overrides in CONFIGS.items():
        cfg = _small(overrides)
        layout = Layout.run(tmp / label.replace(" ", "_"))
        for name, stage in stages.items():
            stage(recording(cfg, reads[name]), layout)
    return reads


@pytest.fixture(scope="module")
def reads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    return _reads(tmp_path_factory.mktemp("stages"))


def _declared(stage: str) -> set[str]:
    return {p for p in DVC[stage].get("params", []) if isinstance(p, str)}


def _covers(prefix: str, key: str) -> bool:
    return key == prefix or key.startswith(f"{prefix}.")


def test_each_stage_declares_exactly_the_keys_its_function_reads(reads):
    wrong = {}
    for stage, keys in reads.items():
        declared = _declared(stage)
        unread = {p for p in declared if not any(_covers(p, k) or _covers(k, p) for k in keys)}
        undeclared = {k for k in keys if not any(_covers(p, k) for p in declared)}
        if unread or undeclared:
            wrong[stage] = {"declared, not read": unread, "read, not declared": undeclared}
    assert not wrong, wrong
    assert set(reads) | {"track"} == set(DVC)
    # the recorder sees what is read, field by field
    assert reads["rank"] >= {"evaluation.ks", "retriever.depth", "retriever.chunk_queries"}


def test_track_declares_every_section_since_it_logs_the_whole_config():
    assert _declared("track") == set(SECTIONS)


def test_every_section_of_params_yaml_is_declared_by_a_stage_that_reads_it():
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    readers = {p.split(".")[0] for s in DVC if s != "track" for p in _declared(s)}
    assert set(params) == set(SECTIONS) == readers | {"tracking"}  # tracking: track's alone


def _options() -> list[tuple[str, str]]:
    out = [(g, o) for g, options in GROUPS.items() for o in options]
    out += [
        (f"{group}@{section}.{key}", option)
        for section, parts in COMPOSED.items()
        for key, (group, allowed) in parts.items()
        for option in allowed
    ]
    return sorted(out)


def _flat(value: Any, prefix: str) -> Iterator[str]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _flat(inner, f"{prefix}.{key}")
    else:
        yield prefix


@pytest.mark.parametrize(("group", "option"), _options())
def test_every_option_of_every_group_reaches_the_params_of_a_stage(group, option):
    assert (CONF_DIR / group.split("@")[0] / f"{option}.yaml").is_file()
    extra = list(REQUIRED.get((group, option), []))
    if group == "index" and option != "none":
        extra.append("retriever=dense_lsa")
    if group == "corpus" and option == "vectors":  # vector_search's corpus only
        with pytest.raises(ArecallError, match="vector_search"):
            default_config([f"{group}={option}"])
        return
    cfg = default_config([f"{group}={option}", *[e for e in extra if "index=exact" not in e]])
    section = group.split("@")[1] if "@" in group else group
    node: Any = cfg.params()
    for part in section.split("."):
        node = node[part]
    declared = {p for s in DVC for p in _declared(s)}
    missing = [k for k in _flat(node, section) if not any(_covers(p, k) for p in declared)]
    assert not missing, f"{group}={option} sets keys no stage declares: {missing}"
