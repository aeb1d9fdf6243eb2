"""Content digests: the same content, the same SHA-256, whichever process computes it.

One definition for the three things arecall addresses by content: a configuration (its
`arecall.config_hash`), a set of report files (`arecall.reports_digest`, so `arecall log` knows
results already logged) and the vector-experiment cache's keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["files_digest", "json_digest"]


def json_digest(value: Any) -> str:
    """SHA-256 (hex) of ``value`` as canonical JSON: key order and spacing never matter.

    Examples
    --------
    >>> json_digest({"a": 1, "b": [2]}) == json_digest({"b": [2], "a": 1})
    True
    >>> len(json_digest({}))
    64
    """
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def files_digest(named: Iterable[tuple[str, Path]]) -> str:
    """SHA-256 (hex) of files, each as its given name and its bytes, in the order given.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a.txt").write_text("x")
    >>> files_digest([("a.txt", d / "a.txt")]) == files_digest([("a.txt", d / "a.txt")])
    True
    >>> files_digest([("a.txt", d / "a.txt")]) == files_digest([("b.txt", d / "a.txt")])
    False
    """
    digest = hashlib.sha256()
    for name, path in named:
        digest.update(name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return digest.hexdigest()
