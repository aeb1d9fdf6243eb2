"""User-facing errors.

Anything the user can fix (a bad file, a bad config value) raises `ArecallError` with a message
that names the file, line or field. Entry points turn it into one line on stderr and exit status 2,
without a traceback; everything else is a bug and keeps its traceback.
"""

from __future__ import annotations

__all__ = ["ArecallError"]


class ArecallError(Exception):
    """A problem with the user's input or configuration, reported as one line.

    Examples
    --------
    >>> str(ArecallError("queries.json: queries[3]: missing field 'relevant'"))
    "queries.json: queries[3]: missing field 'relevant'"
    """
