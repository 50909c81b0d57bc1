"""Running and keeping experiments: the benchmark protocol, results files, action-log replay, statistics, Ray.

Layer ``runs`` (see docs/architecture.md): beside ``env``, above ``sim``; never imports agents or ``app``.
"""
