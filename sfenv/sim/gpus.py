"""GPU accounting: free GPUs per region, regions in an outage, and busy GPU-seconds."""

from __future__ import annotations

from typing import Any

import numpy as np

from sfenv.sim.view import read_only

__all__ = ["GpuPool"]


class GpuPool:
    """The GPUs of every region: how many are free, which regions are down, and how busy they were.

    :param counts: GPUs per region.
    """

    def __init__(self, counts: np.ndarray):
        #: free GPUs per region (also in regions that are down)
        self.free: np.ndarray = counts.copy()
        #: True for regions in an outage
        self.down = np.zeros(len(counts), dtype=bool)
        #: integral over time of the busy GPUs
        self.busy_gpu_s = 0.0
        self._busy = 0
        self._last_t = 0.0
        # free GPUs outside outages and their total, for the last (free, down) state seen: compared,
        # never tracked (decision-point tests, proposers and the observation ask many times per step)
        self._state: tuple[bytes, bytes] | None = None
        self._now: tuple[np.ndarray, int] = (read_only(np.zeros(0, dtype=self.free.dtype)), 0)

    def take(self, gpus: dict[int, int]) -> None:
        """Mark ``gpus`` (region -> count, negative to give back) busy (call :meth:`accrue_busy` first)."""
        for r, n in gpus.items():
            self.free[r] -= n
            self._busy += n

    def accrue_busy(self, now: float) -> None:
        """Bring the busy GPU-seconds up to ``now``."""
        self.busy_gpu_s += self._busy * (now - self._last_t)
        self._last_t = now

    def free_now(self) -> tuple[np.ndarray, int]:
        """Free GPUs per region (0 in regions that are down, read-only) and their total.

        The same objects while ``free`` and ``down`` hold the same values (compared on every call).
        """
        free_bytes, down_bytes = self.free.tobytes(), self.down.tobytes()
        seen = self._state  # None in an unpickled or copied pool (see __setstate__)
        if seen is None or free_bytes != seen[0] or down_bytes != seen[1]:
            free = read_only(np.where(self.down, 0, self.free))
            self._now = (free, int(free.sum()))
            self._state = (free_bytes, down_bytes)
        return self._now

    def forget(self) -> None:
        """Rebuild the read-only free-GPU array on the next :meth:`free_now` (after the arrays were copied)."""
        self._state = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled or deep-copied: the free-GPU array comes back writable; it is rebuilt read-only on first use."""
        self.__dict__.update(state)
        self._state = None
