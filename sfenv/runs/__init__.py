"""Running and keeping experiments: the benchmark protocol, results files, action-log replay, statistics, Ray.

Layer ``runs`` (see docs/architecture.md): beside ``env``, above ``sim``; never imports agents or ``app``.
"""

from __future__ import annotations

import sys

__all__ = ["log_stderr"]


def log_stderr(msg: str) -> None:
    """Print a progress line to stderr at once (stdout keeps the results): the default ``log`` of long runs.

    :param msg: the line, without its newline.
    """
    print(msg, file=sys.stderr, flush=True)
