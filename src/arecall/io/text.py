"""The one text layer under every reader: open, decompress, decode, split, name the line.

Why one layer: the same bytes must mean the same thing to ``arecall evaluate``, the BEIR source
and ``profiles=acl_file``. Every line-oriented format arecall reads goes through here, so they
all handle these identically:

* **Paths.** A directory given as a file is ``path: is a directory``; a missing file is
  ``path: file not found``.
* **gzip.** A gzip-compressed file (``.gz``; recognised by its first two bytes, whatever its
  name) is decompressed transparently.
* **Encoding.** UTF-8; a byte order mark at the start is dropped; an invalid byte is
  ``path: line N: not valid UTF-8``.
* **Line ends.** ``\\n`` or ``\\r\\n``.
* **Blank lines** (only ASCII whitespace) are skipped everywhere; line numbers still count them.
* **Comments.** A line whose first character is ``#`` is a comment only in the formats people
  write by hand — ACL and groups files (``comments=True``). TREC runs, TREC and BEIR qrels have
  no comments (trec_eval has none; their first field is an id, which may start with ``#``).
* **Fields.** Whitespace-separated formats (TREC) split on runs of ASCII whitespace;
  tab-separated formats (BEIR qrels, ACL, groups) split on each tab and trim ASCII whitespace
  around every field.

The strict reader (`fields`) yields ``(line number, fields)``; the fast reader (`fast_table`,
pyarrow's CSV parser, threaded above 1 MB) returns ``None`` whenever the file is not in the plain
shape it handles, and when it does return a table, row i is line ``i + 1 + skip``, with exactly
the values `fields` would give. Errors are one `ArecallError` line ``file: line N: what``.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from arecall.core.errors import ArecallError

__all__ = ["Separator", "check_file", "fast_table", "fields", "first_fields", "lines", "read_text"]

Separator = Literal["whitespace", "tab"]

_BOM = "\ufeff"
_WS = " \t\n\r\v\f"  # ASCII whitespace, as C's isspace
_WS_RUN = re.compile(r"[ \t\n\r\v\f]+")
_GZIP_MAGIC = b"\x1f\x8b"
_BLOCK = 1 << 24  # bytes pyarrow's CSV reader parses as one block
_THREADED_ABOVE = 1 << 20  # bytes of input above which the CSV reader uses Arrow's CPU pool


def check_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a `Path` if it is a readable file; else the one-line error a user sees.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> check_file(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: /...: is a directory
    """
    p = Path(path)
    if p.is_dir():
        raise ArecallError(f"{p}: is a directory")
    if not p.is_file():
        raise ArecallError(f"{p}: file not found")
    return p


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def _open(path: Path) -> BinaryIO:
    """The file's bytes, decompressed when it is gzip."""
    if _is_gzip(path):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def _decode(raw: bytes, path: Path, number: int) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ArecallError(f"{path}: line {number}: not valid UTF-8") from None
    if number == 1 and text.startswith(_BOM):
        text = text[1:]
    return text.rstrip("\r\n")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    number = 0
    try:
        with _open(path) as fh:
            for number, raw in enumerate(fh, start=1):
                yield number, _decode(raw, path, number)
    except (OSError, EOFError, zlib.error) as exc:
        raise ArecallError(f"{path}: line {number + 1}: cannot read: {exc}") from None


def lines(path: str | os.PathLike[str], *, comments: bool = False) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each non-blank line (and non-comment line, if ``comments``).

    The text has no line end and, on line 1, no byte order mark.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.tsv"
    >>> _ = p.write_bytes("\\ufeffa\\r\\n\\n# note\\nb\\n".encode())
    >>> list(lines(p, comments=True))
    [(1, 'a'), (4, 'b')]
    """
    p = check_file(path)
    for number, text in _lines(p):
        if not text.strip(_WS) or (comments and text.startswith("#")):
            continue
        yield number, text


def _split(text: str, sep: Separator) -> list[str]:
    if sep == "tab":
        return [f.strip(_WS) for f in text.split("\t")]
    return _WS_RUN.split(text.strip(_WS))


def fields(
    path: str | os.PathLike[str], sep: Separator, *, comments: bool = False
) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of each data line: the strict reader.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.trec"
    >>> _ = p.write_text("q1  Q0\\ta 1 0.5 t\\r\\n")
    >>> list(fields(p, "whitespace"))
    [(1, ['q1', 'Q0', 'a', '1', '0.5', 't'])]
    >>> _ = p.write_text("a \\t alice\\n")
    >>> list(fields(p, "tab"))
    [(1, ['a', 'alice'])]
    """
    for number, text in lines(path, comments=comments):
        yield number, _split(text, sep)


def first_fields(
    path: str | os.PathLike[str], sep: Separator, *, comments: bool = False
) -> tuple[int, list[str]] | None:
    """The first data line's ``(line number, fields)``, or None for a file without one."""
    return next(iter(fields(path, sep, comments=comments)), None)


def read_text(path: str | os.PathLike[str]) -> str:
    """A whole file as text (gzip, BOM and UTF-8 handled as for the line readers).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.json"
    >>> _ = p.write_bytes("\\ufeff{}".encode())
    >>> read_text(p)
    '{}'
    """
    p = check_file(path)
    with _open(p) as fh:
        try:
            data = fh.read()
        except (OSError, EOFError, zlib.error) as exc:
            raise ArecallError(f"{p}: cannot read: {exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = data.count(b"\n", 0, exc.start) + 1
        raise ArecallError(f"{p}: line {number}: not valid UTF-8") from None
    return text[1:] if text.startswith(_BOM) else text


def _read_bytes(path: Path) -> bytes | None:
    """The whole file, decompressed; None if it cannot be read (the strict reader says why)."""
    try:
        with _open(path) as fh:
            return fh.read()
    except (OSError, EOFError, zlib.error):
        return None


def _plain(data: bytes, delim: str, sep: Separator) -> bool:
    """Would pyarrow split ``data`` into the fields the strict reader sees (empty ones aside)?

    pyarrow ends a line at a lone ``\r`` too, and in a whitespace-separated format it would keep
    other whitespace inside a field. Single-byte scans find both at memchr speed; empty fields
    (a doubled, leading or trailing delimiter) are found on the parsed columns (`_clean`).
    """
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return False
    if sep == "tab":
        return True
    return not any(ch != delim and ch.encode() in data for ch in " \t\v\f")


def _sniff(first: str, sep: Separator) -> str | None:
    """The single delimiter character of line 1 that pyarrow can split on, or None."""
    if sep == "tab":
        return "\t"
    for delim in (" ", "\t"):
        parts = first.split(delim)
        if len(parts) > 1 and all(p and not any(c in p for c in _WS) for p in parts):
            return delim
    return None


def fast_table(
    path: str | os.PathLike[str],
    sep: Separator,
    columns: Mapping[int, pa.DataType],
    n_fields: int,
    *,
    skip: int = 0,
    comments: bool = False,
) -> pa.Table | None:
    """The data lines through pyarrow's CSV reader, or None: 'use the strict reader'.

    ``columns`` maps a field's position to its type (string fields are checked as `fields`
    would split them; other fields are converted, a failure meaning None). ``skip`` lines
    (a header) are dropped first. Column ``f{i}`` holds field i. Anything the strict reader
    would read differently — a blank or comment line, another separator, a wrong field count,
    whitespace inside a whitespace-separated field, an empty tab-separated field, a byte that
    is not UTF-8 — gives None, so on success row i is line ``i + 1 + skip``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "q.txt"
    >>> _ = p.write_text("q1 0 a 2\\nq1 0 b 0\\n")
    >>> fast_table(p, "whitespace", {0: pa.string(), 3: pa.int64()}, 4)["f3"].to_pylist()
    [2, 0]
    >>> _ = p.write_text("q1 0 a 2\\n\\nq1 0 b 0\\n")
    >>> fast_table(p, "whitespace", {0: pa.string(), 3: pa.int64()}, 4) is None
    True
    """
    p = check_file(path)
    data = _read_bytes(p)
    if data is None:
        return None
    try:
        first = _decode(data[: data.find(b"\n") + 1 or len(data)], p, 1)
    except ArecallError:
        return None
    delim = _sniff(first, sep)
    if delim is None or not _plain(data, delim, sep):
        return None
    names = [f"f{i}" for i in range(n_fields)]
    # every field is converted (strings are UTF-8-checked), as the strict reader decodes it
    types = {f"f{i}": columns.get(i, pa.string()) for i in range(n_fields)}
    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            # blank lines are not skipped: they fail the parse, so on success row i is line i + 1
            read_options=pacsv.ReadOptions(
                column_names=names,
                skip_rows=skip,
                block_size=_BLOCK,
                # Arrow's CPU pool only where it pays: its worker threads outlive the read, and a
                # console-script run that had read two lines through it once died at exit with
                # SIGABRT (`terminate called without an active exception`) after its one-line
                # error. Serially, an 8 MB run parses in ~22 ms against ~17 threaded.
                use_threads=len(data) > _THREADED_ABOVE,
            ),
            parse_options=pacsv.ParseOptions(
                delimiter=delim,
                quote_char=False,
                double_quote=False,
                escape_char=False,
                newlines_in_values=False,
                ignore_empty_lines=False,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=types, null_values=[], strings_can_be_null=False
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError, ValueError, OSError):
        return None
    if table.num_rows == 0:
        return None
    out: dict[str, pa.Array] = {}
    for i, name in enumerate(names):
        column = table[name].combine_chunks()
        if column.null_count:
            return None
        if pa.types.is_string(column.type):
            column = _clean(column, sep)
            if column is None:
                return None
            if i == 0 and comments and pc.any(pc.starts_with(column, "#")).as_py():
                return None
        out[name] = column
    return pa.table(out)


def _clean(column: pa.Array, sep: Separator) -> pa.Array | None:
    """A string column as the strict reader gives it, or None where it would differ.

    Stray whitespace was ruled out on the bytes (`_plain`); tab-separated fields are trimmed.
    An empty field (the strict reader's error to name, or a doubled delimiter) gives None.
    """
    if sep == "tab":
        column = pc.utf8_trim(column, characters=_WS)
    if len(column) and pc.any(pc.equal(pc.utf8_length(column), 0)).as_py():
        return None
    return column
