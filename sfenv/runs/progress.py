"""Progress bars for long work, on stderr: count, rate, elapsed time and ETA (tqdm).

A bar is drawn only when it is wanted (``enabled``: the commands' ``--quiet`` turns it off) and stderr
is a terminal (tqdm's ``disable=None``); in a log file or a pipe there is none.  Bars write to stderr
only: nothing of them enters results files, stdout or an environment's ``info``.

:func:`progress_bar` is one bar; :class:`EpisodesBar` is one bar over the episodes of several
evaluator calls (the leaderboard's and the claims' scenarios), with the ETA of the whole run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, Any

from tqdm import tqdm

__all__ = ["EpisodesBar", "progress_bar"]


def progress_bar(total: int | None, desc: str, unit: str = "it", enabled: bool = True,
                 file: IO[str] | None = None, **kwargs: Any) -> tqdm:
    """A tqdm bar of ``total`` units on ``file`` (stderr), drawn only if ``enabled`` and ``file`` is a terminal.

    :param total: units of the whole work (None: unknown; no ETA then).
    :param desc: what is being done, shown first.
    :param unit: what one unit is (``episode``, ``step``).
    :param enabled: False draws nothing whatever ``file`` is (``--quiet``).
    :param file: where the bar goes (default: ``sys.stderr`` at the call).
    :param kwargs: more tqdm arguments.
    """
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr if file is None else file,
                disable=None if enabled else True, dynamic_ncols=True, **kwargs)


class EpisodesBar:
    """One bar over the episodes of several :func:`sfenv.app.evaluate.evaluate_agents` calls (one per scenario).

    :meth:`part` starts a call's part and gives its ``on_row``; :meth:`end_part` takes the episodes
    the call did not play now (already in its results file) off the total, so the ETA counts only
    episodes still to play.

    :param total: episodes of all the parts (agents x seeds per scenario, summed).
    :param desc: the run's name (``leaderboard``, ``claims``).
    :param enabled: False draws nothing (``--quiet``).
    :param file: where the bar goes (default: stderr).
    """

    def __init__(self, total: int, desc: str, enabled: bool = True, file: IO[str] | None = None) -> None:
        self.desc = desc
        self.bar = progress_bar(total, desc, "episode", enabled, file)
        self._expected = 0
        self._start = 0

    def part(self, label: str, expected: int) -> Callable[[dict[str, Any]], None]:
        """Start the part ``label`` of ``expected`` episodes; returns the ``on_row`` that counts them."""
        self._expected, self._start = expected, self.bar.n
        self.bar.set_description(f"{self.desc} {label}")

        def on_row(row: dict[str, Any]) -> None:
            self.bar.set_postfix_str(f"{row['agent']} seed {row['seed']}")
            self.bar.update()

        return on_row

    def end_part(self) -> None:
        """End the current part: its episodes not played now leave the total."""
        skipped = self._expected - (self.bar.n - self._start)
        if skipped > 0 and self.bar.total is not None:
            self.bar.total -= skipped
            self.bar.refresh()

    def close(self) -> None:
        """Close the bar (it stays on the terminal with its last figures)."""
        self.bar.close()
