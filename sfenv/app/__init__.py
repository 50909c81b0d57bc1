"""The programs users run: the ``sfenv`` command line, the benchmark job, the evaluator, the leaderboard and plots.

Layer ``app`` (see docs/architecture.md): the top of the package, and the only part of ``sfenv/``
that imports :mod:`sfenv.agents`.
"""
