"""A planner's memory of answers that depend only on its (frozen) calibration and a key."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from arecall.vector.placement.settings import PlannerSettings

__all__ = ["Remembering"]


class Remembering:
    """``_remember`` and ``_remember_many`` for a frozen planner: ``auto`` asks the same
    questions (an efSearch for a share and batch size, a walk's price) on every call, and at
    100,000 vectors their numpy arithmetic was 3% of the search. Bounded by
    ``settings.memo_entries``."""

    settings: PlannerSettings

    def _remember(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """``compute()``, once per key: answers that depend only on the (frozen) calibration
        and a key (a share or efSearch, and a batch size). Cleared past ``memo_entries``."""
        memo = self._memo
        if key not in memo:
            if len(memo) >= self.settings.memo_entries:
                memo.clear()
            memo[key] = compute()
        return memo[key]

    def _remember_many(
        self, tag: str, values: npt.NDArray[np.float64], compute: Any
    ) -> npt.NDArray[np.int64]:
        """:meth:`_remember` for many values at once: ``compute`` (vectorised) runs only on the
        values not remembered under ``tag`` yet."""
        memo = self._memo
        missing = np.array([x for x in values if (tag, float(x)) not in memo], dtype=np.float64)
        if missing.size:
            if len(memo) + missing.size > self.settings.memo_entries:
                memo.clear()
            for x, answer in zip(missing, compute(missing), strict=True):
                memo[(tag, float(x))] = int(answer)
        return np.array([memo[(tag, float(x))] for x in values], dtype=np.int64)

    @cached_property
    def _memo(self) -> dict[tuple[Any, ...], Any]:
        """The store of :meth:`_remember` and :meth:`_remember_many`."""
        return {}
