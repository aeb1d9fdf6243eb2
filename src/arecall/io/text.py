"""The one text layer under every reader: open, decompress, decode, split, name the line.

Why one layer: the same bytes must mean the same thing to ``arecall evaluate``, the BEIR source
and ``profiles=acl_file``. Every line-oriented format arecall reads goes through here, so they
all handle these identically:

* **Paths.** A directory given as a file is ``path: is a directory``; a missing file is
  ``path: file not found``. A pipe (``<(cat run)``, ``/dev/stdin``) is read like a file, once,
  front to back: every reader here makes a single pass.
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

* **Size.** A file is read in blocks of whole lines (`chunks`, `BLOCK` bytes), so memory does not
  grow with the file; a line longer than `MAX_LINE` (a file that is not lines of text, a
  decompression bomb of zeros) is one error, not a ``MemoryError``.

The strict reader (`fields`, and `chunk_fields` for one block) yields ``(line number, fields)``;
the fast reader (`parse_chunk`, pyarrow's CSV parser on one block) returns ``None`` whenever the
block is not in the plain shape it handles, and when it does return a table, row i is line
``first_line + i + skip``, with exactly the values the strict reader would give. A reader tries
the fast path on each block and falls back to the strict one for that block only, so a pipe is
never read twice. Errors are one `ArecallError` line ``file: line N: what``.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from arecall.core.errors import ArecallError

__all__ = [
    "BLOCK",
    "MAX_LINE",
    "Chunk",
    "Separator",
    "check_file",
    "chunk_fields",
    "chunks",
    "fast_table",
    "fields",
    "first_fields",
    "lines",
    "parse_chunk",
    "read_text",
]

Separator = Literal["whitespace", "tab"]

_BOM = b"\xef\xbb\xbf"
_WS = " \t\n\r\v\f"  # ASCII whitespace, as C's isspace
_WS_RUN = re.compile(r"[ \t\n\r\v\f]+")
_GZIP_MAGIC = b"\x1f\x8b"
#: Bytes of whole lines read, decompressed and parsed as one block. Under 32 MiB: glibc serves
#: a freed buffer of this size again from its heap, where a 32 MiB one is a fresh mmap whose
#: page faults cost more than the read (18 ms against 1 ms, measured).
BLOCK = 24 << 20
#: The longest line any format may have (its fields are ids and numbers): past it, the input is
#: not a text file of lines and reading stops with one line, whatever the file's size.
MAX_LINE = 1 << 20
#: The most a whole-file read (`read_text`, a JSON file) may inflate to.
MAX_TEXT = 1 << 30


def check_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a `Path` if it can be read as a file; else the one-line error a user sees.

    A pipe or a device (``/dev/stdin``, a shell's ``<(…)``) is accepted: readers read it once.

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
    if not p.exists():
        raise ArecallError(f"{p}: file not found")
    return p


class _Source:
    """A file's bytes, decompressed when it is gzip, read into buffers the caller owns.

    One open, and the two bytes that tell gzip apart are kept, so a pipe works too; a plain
    file is read straight into the caller's buffer (no copy through an intermediate one).
    """

    def __init__(self, path: Path) -> None:
        self._raw = path.open("rb", buffering=0)
        head = b""
        while len(head) < 2:
            more = self._raw.read(2 - len(head))
            if not more:
                break
            head += more
        self._head = head
        self._gzip: gzip.GzipFile | None = None
        if head == _GZIP_MAGIC:
            self._gzip = gzip.GzipFile(fileobj=io.BufferedReader(_Replay(head, self._raw)))
            self._head = b""

    def fill(self, view: memoryview) -> int:
        """Read into ``view`` until it is full or the input ends; the bytes read."""
        done = 0
        if self._head:
            done = min(len(self._head), len(view))
            view[:done] = self._head[:done]
            self._head = self._head[done:]
        reader = self._gzip if self._gzip is not None else self._raw
        while done < len(view):
            got = reader.readinto(view[done:])
            if not got:
                break
            done += got
        return done

    def read(self, limit: int) -> bytes:
        """Everything, up to ``limit`` bytes (read a piece at a time, not allocated up front)."""
        out = bytearray()
        while len(out) < limit:
            piece = bytearray(min(1 << 24, limit - len(out)))
            got = self.fill(memoryview(piece))
            out += piece[:got]
            if got < len(piece):
                break
        return bytes(out)

    def __enter__(self) -> _Source:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._gzip is not None:
            self._gzip.close()
        self._raw.close()


class _Replay(io.RawIOBase):
    """The bytes already taken from a stream (to sniff gzip), then the rest of the stream."""

    def __init__(self, prefix: bytes, rest: Any) -> None:
        self._prefix, self._rest = prefix, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return int(self._rest.readinto(buffer) or 0)


def _decode(raw: bytes | bytearray, path: Path, number: int) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ArecallError(f"{path}: line {number}: not valid UTF-8") from None
    return text.rstrip("\r\n")


@dataclass(frozen=True)
class Chunk:
    """Whole lines of a file, read as one block.

    Attributes
    ----------
    path : Path
    first_line : int
        The number of the block's first line.
    data : bytes
        Whole lines; only the file's last line may lack its line end. The byte order mark of
        the file's start is removed.
    """

    path: Path
    first_line: int
    data: bytes | bytearray

    def lines(self) -> Iterator[tuple[int, bytes | bytearray]]:
        """``(line number, bytes without the \\n)`` of every line of the block."""
        parts: list[bytes | bytearray] = list(self.data.split(b"\n"))
        if parts and parts[-1] == b"":
            parts.pop()
        return enumerate(parts, start=self.first_line)


def _too_long(path: Path, number: int) -> ArecallError:
    return ArecallError(
        f"{path}: line {number}: more than {MAX_LINE >> 20} MiB without a line end "
        "(not a text file of lines)"
    )


#: ``cut(data, end)``: where a block ending at ``end`` (just past a line end) should stop, so
#: that a group of lines stays in one block; 0 asks for more data first.
Cut = Callable[[bytes | bytearray, int], int]


def chunks(
    path: str | os.PathLike[str],
    size: int = BLOCK,
    *,
    cut: Cut | None = None,
    group: int = 1 << 30,
    what: str = "in one group of lines",
) -> Iterator[Chunk]:
    """The file as blocks of about ``size`` bytes of whole lines, read once, front to back.

    ``cut`` may move a block's end back to a line start (keeping a group of lines, such as one
    query's results, in one block); what it leaves starts the next block. A group longer than
    ``group`` bytes (``what`` says of what) stops the read with one line. Reading and
    decompressing take at most ``size`` bytes at a time, so neither a huge file nor a
    decompression bomb costs more than a block; a line longer than `MAX_LINE` stops the read.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
    >>> _ = p.write_bytes(b"\\xef\\xbb\\xbfa\\nb\\nc")
    >>> [(c.first_line, bytes(c.data)) for c in chunks(p, size=2)]
    [(1, b'a\\n'), (2, b'b\\n'), (3, b'c')]
    """
    p = check_file(path)
    number, pending, first = 1, b"", True
    try:
        with _Source(p) as source:
            while True:
                # a fresh buffer per block: the previous one may still be parsed in a thread
                data = bytearray(len(pending) + max(size, len(_BOM)))
                data[: len(pending)] = pending
                try:
                    got = source.fill(memoryview(data)[len(pending) :])
                except (OSError, EOFError, zlib.error) as exc:
                    at = number + pending.count(b"\n")
                    raise ArecallError(f"{p}: line {at}: cannot read: {exc}") from None
                del data[len(pending) + got :]
                if first:
                    first = False
                    if data.startswith(_BOM):
                        del data[: len(_BOM)]
                if not got:
                    if len(data) - (data.rfind(b"\n") + 1) > MAX_LINE:
                        raise _too_long(p, number + data.count(b"\n"))
                    if data:
                        yield Chunk(p, number, data)
                    return
                end = data.rfind(b"\n") + 1
                if len(data) - end > MAX_LINE:
                    raise _too_long(p, number + data.count(b"\n", 0, end))
                if end and cut is not None:
                    end = cut(data, end)
                if end == 0:
                    if len(data) > group:
                        raise ArecallError(
                            f"{p}: line {number}: more than {group >> 20} MiB {what}; "
                            "a group is read whole"
                        )
                    pending = bytes(data)
                    continue
                pending = bytes(data[end:])
                del data[end:]
                yield Chunk(p, number, data)
                number += _newlines(data)
    except OSError as exc:  # opening, or closing a truncated gzip
        raise ArecallError(f"{p}: cannot read: {exc}") from None


def _newlines(data: bytes | bytearray) -> int:
    """How many line ends ``data`` holds (numpy's vectorised compare: twice bytes.count's speed)."""
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 10))


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
    for chunk in chunks(path):
        yield from _chunk_lines(chunk, comments)


def _chunk_lines(chunk: Chunk, comments: bool) -> Iterator[tuple[int, str]]:
    for number, raw in chunk.lines():
        text = _decode(raw, chunk.path, number)
        if not text.strip(_WS) or (comments and text.startswith("#")):
            continue
        yield number, text


def _split(text: str, sep: Separator) -> list[str]:
    if sep == "tab":
        return [f.strip(_WS) for f in text.split("\t")]
    return _WS_RUN.split(text.strip(_WS))


def chunk_fields(
    chunk: Chunk, sep: Separator, *, comments: bool = False
) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of each data line of one block: the strict reader."""
    for number, text in _chunk_lines(chunk, comments):
        yield number, _split(text, sep)


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
    for chunk in chunks(path):
        yield from chunk_fields(chunk, sep, comments=comments)


def first_fields(
    path: str | os.PathLike[str], sep: Separator, *, comments: bool = False
) -> tuple[int, list[str]] | None:
    """The first data line's ``(line number, fields)``, or None for a file without one."""
    return next(iter(fields(path, sep, comments=comments)), None)


def read_text(path: str | os.PathLike[str]) -> str:
    """A whole file as text (gzip, BOM and UTF-8 handled as for the line readers).

    At most `MAX_TEXT` bytes (after decompression): past that, one error.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.json"
    >>> _ = p.write_bytes("\\ufeff{}".encode())
    >>> read_text(p)
    '{}'
    """
    p = check_file(path)
    try:
        with _Source(p) as source:
            data = source.read(MAX_TEXT + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ArecallError(f"{p}: cannot read: {exc}") from None
    if len(data) > MAX_TEXT:
        raise ArecallError(f"{p}: larger than {MAX_TEXT >> 30} GiB; not a file this reads whole")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = data.count(b"\n", 0, exc.start) + 1
        raise ArecallError(f"{p}: line {number}: not valid UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def _plain(data: bytes | bytearray, delim: str, sep: Separator) -> bool:
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


#: A column's type that asks for its values to be checked (not empty; UTF-8 with the rest of the
#: block) but not converted to strings: a column no reader needs as text (a run's ``Q0`` and
#: tag). Parsed as raw bytes, it costs about 70 ns a run line against 100 dictionary-encoded.
CHECKED = pa.binary()


def parse_chunk(
    chunk: Chunk,
    sep: Separator,
    columns: Mapping[int, pa.DataType],
    n_fields: int,
    *,
    skip: int = 0,
    comments: bool = False,
) -> pa.Table | None:
    """One block's data lines through pyarrow's CSV reader, or None: 'use the strict reader'.

    ``columns`` maps a field's position to its type (string fields — `CHECKED` ones too — are
    checked as `fields` would split them; other fields are converted, a failure meaning None).
    ``skip`` lines (a header) are dropped first. Column ``f{i}`` holds field i. Anything the
    strict reader would read differently — a blank or comment line, another separator, a wrong
    field count, whitespace inside a whitespace-separated field, an empty field, a byte that is
    not UTF-8 — gives None, so on success row i is line ``chunk.first_line + i + skip``.
    """
    data = chunk.data
    newline = data.find(b"\n", 0, MAX_LINE)
    try:
        first = _decode(data[: newline + 1 or len(data)], chunk.path, 1)
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
                block_size=max(len(data), 1),
                # one thread per block: the readers parse blocks side by side themselves, and
                # Arrow's CPU pool outliving a short CLI run once died at exit with SIGABRT
                use_threads=False,
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
    checked_text = False
    for i, name in enumerate(names):
        column = table[name].combine_chunks()
        if column.null_count:
            return None
        if pa.types.is_binary(column.type):
            if len(column) and pc.min(pc.binary_length(column)).as_py() == 0:
                return None
            if not checked_text:  # the bytes of a column parsed raw: UTF-8, as the strict reader
                checked_text = True  # decodes every line
                if not data.isascii():
                    try:
                        bytes(data).decode("utf-8")
                    except UnicodeDecodeError:
                        return None
        elif pa.types.is_string(column.type):
            column = _clean(column, sep)
            if column is None:
                return None
            if i == 0 and comments and pc.any(pc.starts_with(column, "#")).as_py():
                return None
        out[name] = column
    return pa.table(out)


def fast_table(
    path: str | os.PathLike[str],
    sep: Separator,
    columns: Mapping[int, pa.DataType],
    n_fields: int,
    *,
    skip: int = 0,
    comments: bool = False,
) -> pa.Table | None:
    """The whole file through `parse_chunk`, block by block, or None if any block needs the
    strict reader (then row i is line ``i + 1 + skip``).

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
    tables = []
    try:
        for i, chunk in enumerate(chunks(path)):
            table = parse_chunk(
                chunk, sep, columns, n_fields, skip=skip if i == 0 else 0, comments=comments
            )
            if table is None:
                return None
            tables.append(table)
    except ArecallError:
        return None
    if not tables:
        return None
    return pa.concat_tables(tables).combine_chunks()


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
