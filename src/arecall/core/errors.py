"""User-facing errors.

Anything the user can fix (a bad file, a bad config value) raises `ArecallError` with a message
that names the file, line or field. Entry points turn it into one line on stderr and exit status 2,
without a traceback; everything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys

__all__ = ["ArecallError", "print_error"]


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
