"""User-facing errors.

Anything the user can fix (a bad file, a bad config value) raises `ArecallError` with a message
that names the file, line or field. Entry points turn it into one line on stderr and exit status 2,
without a traceback; everything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys

__all__ = ["ArecallError", "note_user_error", "noted_user_errors", "print_error"]

_NOTED: list[str] = []


class ArecallError(Exception):
    """A problem with the user's input or configuration, reported as one line.

    Examples
    --------
    >>> str(ArecallError("queries.json: queries[3]: missing field 'relevant'"))
    "queries.json: queries[3]: missing field 'relevant'"
    """


def print_error(error: BaseException | str) -> int:
    """Print a user error as the one ``arecall: error: ...`` line; return exit status 2.

    Every entry point (the ``arecall`` commands and the DVC stages) ends a user error here, so
    the format is defined once.

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     status = print_error(ArecallError("params.yaml: evaluation.ks[0]: must be positive"))
    >>> status, err.getvalue().strip()
    (2, 'arecall: error: params.yaml: evaluation.ks[0]: must be positive')
    """
    print(f"arecall: error: {error}", file=sys.stderr)
    return 2


def note_user_error(message: str) -> None:
    """Record a user error that a framework reports in our place (Hydra's compact errors).

    Hydra prints a `CompactHydraException` as its one line and exits 1; the exceptions arecall
    raises that way (a failed sweep point, an unreachable cluster) note themselves here when
    made — also when unpickled in the launching process — so ``arecall run`` can exit 2 like
    every other user error.

    Examples
    --------
    >>> note_user_error("sweep point 0 failed")
    >>> noted_user_errors()[-1]
    'sweep point 0 failed'
    """
    _NOTED.append(message)


def noted_user_errors() -> tuple[str, ...]:
    """The user errors noted so far in this process (`note_user_error`)."""
    return tuple(_NOTED)
