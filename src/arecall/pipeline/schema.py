"""The experiment configuration's schema: every group option's dataclass, in Hydra's ConfigStore.

Each config group mirrors the code it configures, and each option's dataclass lives next to
that code: ``corpus`` → `arecall.data.sources.schema` (and
`arecall.vector.config.VectorsCorpusConfig` for ``corpus=vectors``), ``retriever`` →
`arecall.retrievers.schema`, ``profiles`` → `arecall.data.authorization.schema`, ``index`` →
`arecall.vector.config` (`IndexConfig` is the one class the config check and the vector code
share), ``evaluation`` and ``tracking`` → below. `GROUPS` lists
them; `register` stores each as ``<group>/base_<option>`` in Hydra's ConfigStore, which
``conf/<group>/<option>.yaml`` extends (``defaults: [base_<option>]``), so the YAML files
repeat no value. `check_config` is the one check of a whole configuration, for ``arecall run``
(after Hydra's composition) and for ``params.yaml`` (DVC) alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from arecall.core.schema import (
    NON_NEGATIVE,
    POSITIVE,
    ConfigProblem,
    Rule,
    interval,
    one_of,
    select,
    setting,
    validate,
)
from arecall.data.authorization import MODELS
from arecall.data.sources import SOURCES
from arecall.pipeline.budget import check_config_memory
from arecall.retrievers import RETRIEVERS
from arecall.vector.config import (
    ExactIndexConfig,
    IndexConfig,
    NoIndexConfig,
    VectorsCorpusConfig,
)

__all__ = [
    "COMPOSED",
    "GROUPS",
    "SECTIONS",
    "VECTORS_REFUSAL",
    "EngineConfig",
    "EvaluationConfig",
    "TrackingConfig",
    "VectorSearchSection",
    "check_config",
    "check_depth",
    "composable",
    "register",
]


# -- evaluation and tracking ----------------------------------------------------------------------


@dataclass
class SignificanceConfig:
    """Δ@K's paired bootstrap CI and randomization test.

    Attributes
    ----------
    confidence : float
        The CI's confidence, in (0, 1).
    resamples : int
        Bootstrap and randomization resamples.
    seed : int
        Seeds the resampling.
    """

    confidence: float = setting(0.95, interval(0.0, 1.0, low_open=True, high_open=True))
    resamples: int = setting(2000, POSITIVE)
    seed: int = setting(0, Rule("a non-negative integer", lambda v: v >= 0))

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """Enough resamples for the interval's tails (`arecall.core.significance`)."""
        from arecall.core.significance import resamples_problem

        problem = resamples_problem(self.resamples, self.confidence)
        if problem is not None:
            yield "resamples", problem, self.resamples


@dataclass
class ProofConfig:
    """The property search of the prove stage.

    Attributes
    ----------
    max_examples : int
        Hypothesis examples per property claim (derandomized).
    """

    max_examples: int = setting(200, POSITIVE)


@dataclass
class EngineConfig:
    """Where the rank stage's query blocks and the score and prove stages' per-principal work
    run (`arecall.core.engine`).

    The results are byte-identical whatever the engine: principals are cut into blocks, each
    block computed anywhere, the blocks' arrays joined in order, and every mean, resample and
    counterexample taken centrally from the joined arrays.

    Attributes
    ----------
    name : str
        ``local`` (this process) or ``dask`` (a Dask distributed cluster; needs the
        ``arecall[cluster]`` extra and ``scheduler``).
    scheduler : str
        The Dask scheduler's address, e.g. ``tcp://127.0.0.1:8786`` (``dask`` only).
    block_principals : int
        Principals per block (one task each on a cluster); 0 sizes blocks to about 4M list
        cells.
    block_queries : int
        The rank stage's queries per block (one task each on a cluster; each block writes its
        part of the ranking); 0 sizes blocks to about 64M score cells
        (`arecall.core.rank_blocks.auto_block`).
    doc_shards : int
        Document shards the rank stage scores apart and merges per query (1: none); for
        document sets one process cannot score at once.
    """

    name: str = setting("local", one_of("local", "dask"))
    scheduler: str = setting(
        "", Rule("a scheduler address (tcp://host:port) or empty", lambda v: v == "" or "://" in v)
    )
    block_principals: int = setting(0, NON_NEGATIVE)
    block_queries: int = setting(0, NON_NEGATIVE)
    doc_shards: int = setting(1, POSITIVE)

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """``dask`` needs a scheduler: refused here, not by the score stage after three ran."""
        if self.name == "dask" and not self.scheduler:
            yield (  # on name: it is what the user chose, and what the override sets
                "name",
                "dask needs evaluation.engine.scheduler, a scheduler address such as "
                "tcp://127.0.0.1:8786",
                self.name,
            )


@dataclass
class EvaluationConfig:
    """``evaluation``: the cut-offs and statistics of the text pipeline.

    Both placements (post: truncate, then filter; pre: filter, then truncate) are always
    measured: the comparison is the point, so it is not a setting.

    Attributes
    ----------
    ks : list of int
        Cut-offs K (positive; reported ascending, each once).
    significance : SignificanceConfig
    proof : ProofConfig
    engine : EngineConfig
    """

    ks: list[int] = setting([1, 3, 5, 10], each=POSITIVE, nonempty=True)  # noqa: RUF009 (a dataclass field)
    significance: SignificanceConfig = field(default_factory=SignificanceConfig)
    proof: ProofConfig = field(default_factory=ProofConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)


@dataclass
class TrackingConfig:
    """``tracking``: MLflow (MLFLOW_TRACKING_URI if set, else sqlite:///mlflow.db in the cwd).

    Attributes
    ----------
    enabled : bool
        Log each run.
    experiment : str
        The MLflow experiment's name.
    on_error : str
        When the store cannot be written (an unreachable server): ``fail`` (exit 2) or ``warn``
        (finish untracked, exit 0); either way one line names the run directory holding the
        results and ``arecall log <dir>``, which logs them later.
    """

    enabled: bool = True
    experiment: str = setting("arecall", Rule("a non-empty name", bool))
    on_error: str = setting("fail", one_of("fail", "warn"))


@dataclass
class VectorSearchSection:
    """``vector_search``: verity's filtered-vector-search experiment, beside the text pipeline.

    ``corpus`` and ``index`` are composed from the groups (``corpus@vector_search.corpus``,
    ``index@vector_search.index``, checked by `check_config`); this schema holds the section's
    place in the composition and its own setting.

    Attributes
    ----------
    enabled : bool
        Run the experiment: the ``vectors`` stage measures it, ``arecall run`` prints its table,
        and it is logged as an MLflow run of its own, nested in the pipeline's run. Off in
        conf/'s defaults (a text run neither waits for nor prints it); on in the DVC pipeline's
        config (conf/repro.yaml), whose table the docs show.
    """

    corpus: Any = None
    index: Any = None
    enabled: bool = False


# -- the groups -----------------------------------------------------------------------------------

#: group -> option -> schema. A group with one schema and no ``name`` maps its option to it.
GROUPS: dict[str, dict[str, type]] = {
    "corpus": {**SOURCES.schemas(), "vectors": VectorsCorpusConfig},
    "retriever": RETRIEVERS.schemas(),
    "profiles": MODELS.schemas(),
    "index": {"none": NoIndexConfig, "exact": ExactIndexConfig, "hnsw": IndexConfig},
    "evaluation": {"default": EvaluationConfig},
    "tracking": {"mlflow": TrackingConfig},
}
#: Sections composed from the groups' options under another package (conf/config.yaml's
#: ``- corpus@vector_search.corpus: vectors``): section -> key -> (group, allowed options).
#: ``vector_search`` is verity's filtered-vector-search experiment, run by the ``vectors`` stage.
COMPOSED: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "vector_search": {"corpus": ("corpus", ("vectors",)), "index": ("index", ("exact", "hnsw"))},
}
#: The schema of each composed section (its own settings; its parts are checked by group).
_SECTION_SCHEMAS: dict[str, type] = {"vector_search": VectorSearchSection}
#: Sections every configuration has, in params.yaml's order.
SECTIONS = (*GROUPS, *COMPOSED)
#: Why ``corpus=vectors`` is not a corpus of the text pipeline (one line, both entry points).
VECTORS_REFUSAL = (
    "corpus=vectors is the vector experiment's corpus, not the text pipeline's: every run "
    "runs it as the vector_search section (vector_search.enabled=true; set "
    "vector_search.corpus.*, index@vector_search.index=exact|hnsw)"
)
_KIND = {
    "corpus": "corpus",
    "retriever": "retriever",
    "profiles": "authorization model",
    "index": "vector index",
}


def register() -> None:
    """Store every option's schema in Hydra's ConfigStore as ``<group>/base_<option>``.

    Idempotent; importing ``arecall.conf`` (Hydra's config module, as DVC composes it) calls it.

    Examples
    --------
    >>> from hydra.core.config_store import ConfigStore
    >>> register()
    >>> "base_hnsw.yaml" in ConfigStore.instance().repo["index"]
    True
    """
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    store = ConfigStore.instance()
    for group, options in GROUPS.items():
        for option, schema in options.items():
            store.store(group=group, name=f"base_{option}", node=composable(schema))
    store.store(name="base_vector_search", node=VectorSearchSection, package="vector_search")
    OmegaConf.register_new_resolver("arecall.vector_search_only", _vector_search_only, replace=True)


def _null_mapping(tp: Any) -> bool:
    """Whether ``tp`` is ``dict[...] | None``: a mapping that may be null."""
    import types
    import typing

    args = typing.get_args(tp)
    if typing.get_origin(tp) not in (typing.Union, types.UnionType) or type(None) not in args:
        return False
    return any(typing.get_origin(a) is dict for a in args)


def composable(schema: type) -> type:
    """``schema`` as Hydra composes it: each mapping that defaults to null typed ``Any``.

    Why: OmegaConf 2.3 cannot merge a value into a typed mapping whose value is null, and every
    override of such a key is a merge (``profiles.grants={analyst:[analytics]}``, through
    ``arecall run`` or ``dvc exp run -S``, ended in ``'NoneType' object has no attribute
    'get'``; omry/omegaconf#1360). Typed ``Any``, the key takes the override as given; the
    composed config is then checked against ``schema`` itself (`check_config`), which names
    a bad value in one line, for ``arecall run`` before anything runs and for DVC in the first
    stage. Every other field keeps its type, so Hydra still checks it while composing.

    Examples
    --------
    >>> from arecall.data.authorization.schema import DomainsProfiles
    >>> from omegaconf import OmegaConf
    >>> cfg = OmegaConf.structured(composable(DomainsProfiles))
    >>> OmegaConf.update(cfg, "grants", {"analyst": ["analytics"]}, merge=True)
    >>> OmegaConf.to_container(cfg)
    {'name': 'domains', 'grants': {'analyst': ['analytics']}}
    >>> composable(NoIndexConfig) is NoIndexConfig
    True
    """
    import dataclasses
    import typing

    hints = typing.get_type_hints(schema)
    loose = [
        (f.name, Any, dataclasses.field(default=None))
        for f in dataclasses.fields(schema)
        if _null_mapping(hints[f.name]) and f.default is None
    ]
    if not loose:
        return schema
    return dataclasses.make_dataclass(schema.__name__, loose, bases=(schema,))


def _vector_search_only(*, _node_: Any) -> str:
    """``corpus/vectors``'s name: ``vectors`` under ``vector_search``, refused anywhere else.

    A resolver, so the refusal happens while Hydra composes — before ``dvc exp run -S
    corpus=vectors`` writes params.yaml or any stage runs — as it does for ``arecall run``.
    """
    key = _node_._get_full_key(None)
    if not str(key).startswith("vector_search."):
        raise ValueError(VECTORS_REFUSAL)
    return "vectors"


def check_config(
    cfg: Any, *, origin: str | Callable[[str], str | None] | None = None
) -> dict[str, Any]:
    """Check a whole configuration; return it typed, each section's defaults filled in.

    ``origin`` names where a bad value came from: a file, or a function of the dotted key (the
    override that set it). The first bad value raises one `ConfigProblem`.

    Examples
    --------
    >>> cfg = check_config({"corpus": {"name": "vectors", "k": 2.5}, "index": {"name": "exact"}},
    ...                    origin="params.yaml")
    Traceback (most recent call last):
    ...
    arecall.core.schema.ConfigProblem: params.yaml: corpus.k: must be a positive integer, got 2.5
    """
    where = origin if callable(origin) else (lambda key: origin)
    try:
        if not isinstance(cfg, Mapping):
            raise ConfigProblem("config", "must be a mapping of config sections", cfg)
        out: dict[str, Any] = {}
        for section in cfg:
            if section not in SECTIONS:
                raise ConfigProblem(
                    str(section),
                    f"unknown config section (known: {', '.join(SECTIONS)})",
                    cfg[section],
                )
        for section, options in GROUPS.items():
            value = cfg.get(section)
            if value is None and section == "index":
                value = {"name": "none"}
            if value is None:
                raise ConfigProblem(section, "missing config section", None)
            if section in _KIND:
                out[section] = select(options, value, section, _KIND[section])
            else:
                (schema,) = options.values()
                out[section] = validate(schema, value, section)
        for section, parts in COMPOSED.items():
            value = cfg.get(section)
            if not isinstance(value, Mapping):
                raise ConfigProblem(section, "missing config section", value)
            out[section] = {}
            for key, (group, allowed) in parts.items():
                at = f"{section}.{key}"
                part = select(GROUPS[group], value.get(key), at, _KIND[group])
                if part["name"] not in allowed:
                    raise ConfigProblem(
                        f"{at}.name", f"must be one of {', '.join(allowed)}", part["name"]
                    )
                out[section][key] = part
            settings = {k: v for k, v in value.items() if k not in parts}
            section_schema = _SECTION_SCHEMAS[section]
            own = validate(section_schema, settings, section)
            out[section].update({k: v for k, v in own.items() if k not in parts})
        if out["corpus"]["name"] == "vectors":
            raise ConfigProblem("corpus", VECTORS_REFUSAL, "vectors")
        _check_index_retriever(out)
        check_depth(out)
        _check_ef_search(out)
        check_config_memory(out)
    except ConfigProblem as problem:
        raise problem.at(where(problem.key) or "config") from None
    return out


def check_depth(cfg: Mapping[str, Any]) -> None:
    """Refuse ``retriever.depth`` below the largest K: a top-K metric needs K ranked documents.

    ``depth`` is how many ranked documents at least are kept per query (null: all); the pre
    lists are kept exact beyond it automatically. A depth under max(``evaluation.ks``) used to
    be raised to it silently; now it is one error line naming both keys, when the config is
    composed (every entry point), before any stage runs.

    Examples
    --------
    >>> check_depth({"retriever": {"depth": None}, "evaluation": {"ks": [1, 10]}})
    >>> check_depth({"retriever": {"depth": 5}, "evaluation": {"ks": [1, 10]}})
    Traceback (most recent call last):
    ...
    arecall.core.schema.ConfigProblem: retriever.depth: must be null or at least the largest K \
(evaluation.ks: 10) — top-K metrics need K ranked documents per query, got 5
    """
    depth, k_max = cfg["retriever"].get("depth"), max(cfg["evaluation"]["ks"])
    if depth is not None and depth < k_max:
        raise ConfigProblem(
            "retriever.depth",
            f"must be null or at least the largest K (evaluation.ks: {k_max}) — top-K metrics "
            "need K ranked documents per query",
            depth,
        )


def _check_ef_search(cfg: Mapping[str, Any]) -> None:
    """An HNSW search keeps ``ef_search`` candidates, so it must be at least the k searched for:
    the text corpus's index is searched for the largest K, the vector experiment for its
    corpus's k. Refused here, naming both keys, not by the index stage after the others ran.

    Examples
    --------
    >>> cfg = {"index": {"name": "hnsw", "ef_search": 64}, "evaluation": {"ks": [5, 100]},
    ...        "vector_search": {"index": {"name": "exact"}, "corpus": {"k": 10}}}
    >>> _check_ef_search(cfg)
    Traceback (most recent call last):
    ...
    arecall.core.schema.ConfigProblem: index.ef_search: must be at least the largest K \
(evaluation.ks: 100): HNSW keeps ef_search candidates, got 64
    """
    text_k = max(cfg["evaluation"]["ks"])
    vector_k = cfg["vector_search"]["corpus"]["k"]
    for at, index, k, what in (
        ("index", cfg["index"], text_k, f"the largest K (evaluation.ks: {text_k})"),
        (
            "vector_search.index",
            cfg["vector_search"]["index"],
            vector_k,
            f"vector_search.corpus.k ({vector_k})",
        ),
    ):
        if index["name"] == "hnsw" and index["ef_search"] < k:
            raise ConfigProblem(
                f"{at}.ef_search",
                f"must be at least {what}: HNSW keeps ef_search candidates",
                index["ef_search"],
            )


def _check_index_retriever(cfg: Mapping[str, Any]) -> None:
    """A vector index over a text corpus needs a retriever with dense embeddings.

    The vectors stage indexes the retriever's ``embed_documents()``; refusing here, not there,
    keeps the earlier stages from running for nothing. Whether a retriever has them is what its
    registry entry answers (`arecall.retrievers.RETRIEVERS`): no retriever is built to ask.
    """
    index = cfg["index"]["name"]
    if index == "none":
        return
    chosen = cfg["retriever"]["name"]
    if "embeddings" in RETRIEVERS[chosen].answers:
        return
    dense = RETRIEVERS.answering("embeddings")
    raise ConfigProblem(
        "index.name",
        f"index={index} needs a retriever with dense embeddings "
        f"(retriever={'|'.join(dense)}), not retriever={chosen}",
        index,
        got=False,
    )
