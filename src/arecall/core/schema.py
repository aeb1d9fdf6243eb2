"""Typed configuration: each setting's type, default and range, declared once on a dataclass.

A config section (``corpus``, ``retriever``, …) is a dataclass; a field's annotation is its type,
its default is *the* default (Hydra's YAML files and the Python API refer to it, never repeat
it), and `setting` attaches the range a value must lie in. `validate` is the one check for both
ways the configuration arrives — Hydra's composition for ``arecall run`` and ``params.yaml`` for
DVC: OmegaConf merges the values into the dataclass (the type check Hydra itself applies), then
every field's `Rule` and the class's own cross-field ``problems()`` run. A bad value is one
`ConfigProblem` naming the dotted key, what is wrong and the value given.

Examples
--------
>>> from dataclasses import dataclass
>>> @dataclass
... class Demo:
...     n: int = setting(3, POSITIVE)
...     share: float = setting(0.5, interval(0.0, 1.0, low_open=True))
>>> checked = validate(Demo, {"n": 5}, "demo")
>>> checked
Demo(n=5, share=0.5)
>>> validate(Demo, checked, "demo") is checked  # checked once: a typed section passes as is
True
>>> validate(Demo, {"n": "abc"}, "demo")
Traceback (most recent call last):
...
arecall.core.schema.ConfigProblem: demo.n: must be a positive integer, got 'abc'
>>> validate(Demo, {"share": 0}, "demo")
Traceback (most recent call last):
...
arecall.core.schema.ConfigProblem: demo.share: must be a number in (0, 1], got 0
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from arecall.core.errors import ArecallError

T = TypeVar("T")

__all__ = [
    "NON_NEGATIVE",
    "POSITIVE",
    "ConfigProblem",
    "Rule",
    "describe",
    "interval",
    "one_of",
    "select",
    "setting",
    "shown",
    "validate",
]


@dataclass(frozen=True)
class Rule:
    """What a value must be (``what`` completes "must be …") and the test it must pass.

    The test runs on values OmegaConf has already converted to the field's type.
    """

    what: str
    test: Callable[[Any], bool]


POSITIVE = Rule("a positive integer", lambda v: v >= 1)
NON_NEGATIVE = Rule("a non-negative integer", lambda v: v >= 0)


def interval(
    low: float, high: float = math.inf, *, low_open: bool = False, high_open: bool = False
) -> Rule:
    """A number between ``low`` and ``high`` (closed unless told open).

    Examples
    --------
    >>> r = interval(0.0, 1.0, low_open=True)
    >>> r.what, r.test(0.0), r.test(1.0)
    ('a number in (0, 1]', False, True)
    >>> interval(0.0).what
    'a non-negative number'
    """
    if high == math.inf and low == 0 and not low_open:
        what = "a non-negative number"
    else:
        lo, hi = f"{low:g}", "∞" if high == math.inf else f"{high:g}"
        what = f"a number in {'(' if low_open else '['}{lo}, {hi}{')' if high_open else ']'}"

    def test(v: float) -> bool:
        above = v > low if low_open else v >= low
        below = v < high if high_open else v <= high
        return above and below and not math.isnan(v)

    return Rule(what, test)


def one_of(*choices: str) -> Rule:
    """One of ``choices``.

    Examples
    --------
    >>> one_of("a", "b").what
    'one of a, b'
    """
    return Rule(f"one of {', '.join(choices)}", lambda v: v in choices)


def setting(
    default: Any, rule: Rule | None = None, *, each: Rule | None = None, nonempty: bool = False
) -> Any:
    """A dataclass field: its default and the `Rule` its value (or each list item) must pass.

    A list default is copied per instance. ``nonempty`` refuses an empty list.
    """
    metadata = {"rule": rule, "each": each, "nonempty": nonempty}
    if isinstance(default, list | tuple | dict):
        frozen = default
        factory = (lambda: dict(frozen)) if isinstance(frozen, dict) else (lambda: list(frozen))
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


class ConfigProblem(ArecallError):
    """A bad configuration value: ``origin: key: problem, got value`` in one line.

    ``got=False`` leaves the value out, for a problem that states it itself (a size estimate).
    A number written as a string says so, since ``got '5'`` alone reads like a quoting slip.

    Examples
    --------
    >>> str(ConfigProblem("evaluation.ks[0]", "must be a positive integer", "5"))
    "evaluation.ks[0]: must be a positive integer, got '5' (a string)"
    """

    def __init__(
        self, key: str, problem: str, value: Any, origin: str | None = None, *, got: bool = True
    ) -> None:
        self.key, self.problem, self.value, self.origin, self.got = key, problem, value, origin, got
        where = f"{origin}: " if origin else ""
        given = f", got {shown(value)}{_string_note(value)}" if got else ""
        super().__init__(f"{where}{key}: {problem}{given}")

    def at(self, origin: str) -> ConfigProblem:
        """The same problem, attributed to ``origin`` (a file or an override)."""
        return ConfigProblem(self.key, self.problem, self.value, origin, got=self.got)


def _string_note(value: Any) -> str:
    """`` (a string)`` for a string that reads as a number, else nothing."""
    if not isinstance(value, str):
        return ""
    try:
        float(value)
    except ValueError:
        return ""
    return " (a string)"


def shown(value: Any) -> str:
    """A value as the message shows it: strings quoted, null for None, lists in brackets.

    Examples
    --------
    >>> shown("abc"), shown(None), shown([1, "x"]), shown(2.5)
    ("'abc'", 'null', "[1, 'x']", '2.5')
    """
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)


# -- what a field must be -------------------------------------------------------------------------

_TYPE_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _optional(tp: Any) -> tuple[Any, bool]:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0], True
    return tp, False


def _type_words(tp: Any) -> str:
    tp, optional = _optional(tp)
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp)
        words = f"a list of {_type_words(item).split(' ', 1)[1]}s"
    elif origin is dict or dataclasses.is_dataclass(tp):
        words = "a mapping"
    else:
        words = _TYPE_WORDS.get(tp, f"a {getattr(tp, '__name__', tp)}")
    return f"null or {words}" if optional else words


def describe(cls: type, path: str) -> str:
    """What the value at ``path`` (``a.b``, ``a[0]``) of schema ``cls`` must be.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Demo:
    ...     ks: list[int] = setting([1], each=POSITIVE)
    ...     depth: int | None = setting(None, POSITIVE)
    >>> describe(Demo, "ks"), describe(Demo, "ks[0]"), describe(Demo, "depth")
    ('a list of positive integers', 'a positive integer', 'null or a positive integer')
    """
    parts = [p for p in re.split(r"\.|(\[\d+\])", path) if p]
    tp: Any = cls
    meta: Mapping[str, Any] = {}
    for part in parts:
        base, _ = _optional(tp)
        if part.startswith("["):
            origin = typing.get_origin(base)
            tp = typing.get_args(base)[-1] if origin in (list, dict) else Any
            rule = meta.get("each")
            meta = {"rule": rule}
            continue
        if dataclasses.is_dataclass(base):
            fields = {f.name: f for f in dataclasses.fields(base)}
            if part not in fields:
                return "a known key"
            meta, tp = fields[part].metadata, _hints(base)[part]  # type: ignore[arg-type]
        elif typing.get_origin(base) is dict:
            tp, meta = typing.get_args(base)[-1], {}
        else:
            return _type_words(tp)
    rule, each = meta.get("rule"), meta.get("each")
    optional = _optional(tp)[1]
    if rule is not None:
        words = rule.what
    elif each is not None:
        words = f"a list of {each.what.split(' ', 1)[1]}s"
        if meta.get("nonempty"):
            words = "a non-empty " + words[2:]
    else:
        return _type_words(tp)
    return f"null or {words}" if optional else words


# -- the check ------------------------------------------------------------------------------------


def _get(data: Any, path: str) -> Any:
    value = data
    for part in [p for p in re.split(r"\.|\[(\d+)\]", path) if p]:
        try:
            value = value[int(part)] if part.isdigit() and isinstance(value, list) else value[part]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def _shape(cls: type, data: Any, prefix: str) -> None:
    """Refuse what OmegaConf reports without a key: a non-mapping where a section is expected,
    and (with the list of known keys) a key the schema does not have."""
    if not isinstance(data, Mapping):
        raise ConfigProblem(prefix, "must be a mapping of settings", data)
    hints = _hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    for key, value in data.items():
        if key not in known:
            raise ConfigProblem(
                f"{prefix}.{key}", f"unknown key (known: {', '.join(known)})", value
            )
        tp, optional = _optional(hints[key])
        where = f"{prefix}.{key}"
        if value is None:
            if not optional:
                raise ConfigProblem(where, f"must be {describe(cls, key)}", value)
        elif dataclasses.is_dataclass(tp):
            _shape(tp, value, where)  # type: ignore[arg-type]
        elif not _instance(value, tp):
            raise ConfigProblem(where, f"must be {describe(cls, key)}", value)
        elif typing.get_origin(tp) is list:
            (item,) = typing.get_args(tp)
            for i, x in enumerate(value):
                if not _instance(x, item):
                    raise ConfigProblem(f"{where}[{i}]", f"must be {describe(cls, f'{key}[0]')}", x)


def _instance(value: Any, tp: Any) -> bool:
    """Strictly of type ``tp``: no bool for a number, no string for a number (YAML and Hydra
    give numbers as numbers, so a string is a typo or a quoting mistake)."""
    origin = typing.get_origin(tp)
    if origin is list:
        return isinstance(value, list | tuple)
    if origin is dict:
        return isinstance(value, Mapping)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp in (str, bool):
        return isinstance(value, tp)
    return True


def _rules(obj: Any, prefix: str, raw: Any) -> None:
    """Each field's `Rule` on the converted value; a problem shows the value as given (``raw``)."""
    raw = raw if isinstance(raw, Mapping) else {}
    for f in dataclasses.fields(obj):
        value, key = getattr(obj, f.name), f"{prefix}.{f.name}"
        given = raw.get(f.name, value)
        if dataclasses.is_dataclass(value):
            _rules(value, key, given)
            continue
        if value is None:
            continue
        rule, each = f.metadata.get("rule"), f.metadata.get("each")
        if f.metadata.get("nonempty") and not value:
            raise ConfigProblem(key, f"must be {describe(type(obj), f.name)}", given)
        if each is not None:
            for i, item in enumerate(value):
                if not each.test(item):
                    raise ConfigProblem(f"{key}[{i}]", f"must be {each.what}", given[i])
        if rule is not None and not rule.test(value):
            raise ConfigProblem(key, f"must be {rule.what}", given)
    problems: Iterator[tuple[str, str, Any]] | None = getattr(obj, "problems", lambda: None)()
    for name, problem, value in problems or ():
        raise ConfigProblem(f"{prefix}.{name}", problem, value)


def validate(cls: type[T], data: Any, prefix: str) -> T:
    """Check ``data`` (one config section, plain values) against schema ``cls``; return it typed.

    Missing keys take the schema's defaults; values are converted as Hydra converts them
    (``"5"`` → 5 for an integer, 1 → 1.0 for a number); a wrong type, a value out of range, an
    unknown key or a failed cross-field check raises one `ConfigProblem` naming
    ``prefix.key``. The result is an instance of ``cls`` (its nested sections instances of
    theirs), what every stage takes; ``data`` that already is one was checked when it was
    made and is returned as it is, so each rule runs once.
    """
    from omegaconf import Node, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(data, cls):
        return data
    _shape(cls, data, prefix)
    try:
        node = OmegaConf.merge(OmegaConf.structured(cls), data)
    except OmegaConfBaseException as exc:
        path = str(exc.full_key or "")
        given = None if isinstance(exc.value, Node) else exc.value  # a node: the value as given
        value = _get(data, path) if given is None else given
        raise ConfigProblem(f"{prefix}.{path}", f"must be {describe(cls, path)}", value) from None
    try:
        typed = OmegaConf.to_object(node)
    except OmegaConfBaseException as exc:  # an interpolation given as a value that fails
        path = str(exc.full_key or "")
        reason = " ".join(str(exc).split("full_key:", 1)[0].split())
        raise ConfigProblem(f"{prefix}.{path}", reason, _get(data, path)) from None
    _rules(typed, prefix, data)
    assert isinstance(typed, cls)
    return typed


def select(schemas: Mapping[str, type], cfg: Any, group: str, kind: str) -> Any:
    """Validate a config group's section against the schema its ``name`` selects; return it typed.

    A section that already is an instance of one of ``schemas`` was checked when it was made
    and is returned as it is.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Plain:
    ...     name: str = "plain"
    >>> select({"plain": Plain}, {"name": "plain"}, "demo", "demo kind")
    Plain(name='plain')
    >>> select({"plain": Plain}, {"name": "fancy"}, "demo", "demo kind")
    Traceback (most recent call last):
    ...
    arecall.core.schema.ConfigProblem: demo.name: unknown demo kind (known: plain), got 'fancy'
    """
    if isinstance(cfg, tuple(schemas.values())):
        return cfg
    if not isinstance(cfg, Mapping):
        raise ConfigProblem(group, "must be a mapping of settings", cfg)
    name = cfg.get("name")
    if not isinstance(name, str) or name not in schemas:
        raise ConfigProblem(
            f"{group}.name", f"unknown {kind} (known: {', '.join(sorted(schemas))})", name
        )
    return validate(schemas[name], cfg, group)
