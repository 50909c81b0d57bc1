"""Ray as an execution backend: independent tasks spread over a local or remote Ray cluster.

sfenv does not run its own process pool: work that splits into independent pieces (one evaluated
episode per (agent, scenario, seed), see :func:`sfenv.app.evaluate.evaluate_agents` with
``backend="ray"``) runs as Ray tasks.  This module is generic: it knows nothing of agents or
simulators, only functions, arguments and results.

- :func:`ray_session` connects to a cluster (``address="auto"`` or ``"HOST:PORT"`` of a head
  started with ``ray start --head``) or starts a local Ray with ``workers`` CPUs, and shuts down
  only what it started;
- :func:`ray_imap_unordered` runs ``fn(*shared, *args)`` for every item as a Ray task, at most
  ``workers`` in flight, and yields ``(index, result)`` as tasks finish, so the caller can save each
  result at once.  A task whose worker process dies (killed, out of memory, node lost) is retried by
  Ray up to ``max_retries`` times; an exception raised by ``fn`` itself is a bug or bad input and
  is not retried: it propagates to the caller, with the pending tasks cancelled.

Ray is imported only here and only when one of these functions is called: ``import sfenv`` and
the default (serial) backend never import it.  Without the ``ray`` extra the functions raise
:class:`~sfenv.errors.DependencyNotInstalled` naming ``pip install "sfenv[ray]"``.

Ray looks for a cloud metadata address and does DNS look-ups when it starts (see the project's
dependency notes); :func:`ray_session` turns off Ray's usage statistics
(``RAY_USAGE_STATS_ENABLED=0``) unless the caller set that variable, and never chooses an address
itself: without ``address`` Ray runs on this machine only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

from sfenv.errors import DependencyNotInstalled, InvalidInput

__all__ = ["BACKENDS", "check_backend", "import_ray", "ray_imap_unordered", "ray_session"]

#: the execution backends the evaluator, ``sfenv evaluate/benchmark`` and the claims script accept
BACKENDS: tuple[str, ...] = ("serial", "ray")


def check_backend(backend: str, address: str | None = None, workers: int | None = None) -> None:
    """Check backend options before anything runs.

    :raises InvalidInput: for an unknown backend, ``workers < 1``, or ``address``/``workers`` given
        to the serial backend (they would be silently ignored).
    """
    if backend not in BACKENDS:
        raise InvalidInput(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InvalidInput(f"workers = {workers!r}; expected an integer >= 1")
    if backend == "serial" and (address is not None or workers is not None):
        raise InvalidInput("address and workers apply to the ray backend only (add backend='ray', "
                           "--backend ray on the command line)")


def import_ray() -> ModuleType:
    """Import Ray, or say how to install it.

    :raises DependencyNotInstalled: without the ``ray`` extra.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as e:
        raise DependencyNotInstalled(
            f"{e.name or 'ray'} is not installed; the ray backend and rllib-ppo need the ray extra: "
            "pip install \"sfenv[ray]\""
        ) from e
    return ray


@contextlib.contextmanager
def ray_session(address: str | None = None, workers: int | None = None) -> Iterator[ModuleType]:
    """A connected Ray for the duration of the ``with`` block; yields the ``ray`` module.

    If Ray is already initialised in this process (by the caller or an outer session) it is used
    as it is and left running.  Otherwise Ray joins the cluster at ``address`` (``"auto"`` finds a
    cluster started on this machine with ``ray start``) or, without an address, starts a local
    instance with ``workers`` CPUs (default: all of this machine's), and is shut down at the end.

    :param address: a Ray cluster address, e.g. ``"auto"`` or ``"10.0.0.1:6379"``.  Ray's token
        authentication: a cluster started with ``ray start`` expects the token of its head's
        ``~/.ray/auth_token`` (the same file on every node and on the driver's machine) and the
        driver needs ``RAY_AUTH_MODE=token`` in its environment (Ray 2.60 does not switch it on
        when it joins a cluster).
    :param workers: CPUs of the local instance (ignored when joining a cluster; use it in
        :func:`ray_imap_unordered` to cap the tasks in flight).
    """
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    if address is not None:
        ray.init(address=address, include_dashboard=False)
    else:
        # "local": always a new instance here, never a cluster that `ray start` left on this machine
        ray.init(address="local", num_cpus=workers or os.cpu_count() or 1, include_dashboard=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def ray_imap_unordered(
    fn: Callable[..., Any],
    items: Sequence[tuple],
    shared: tuple = (),
    *,
    address: str | None = None,
    workers: int | None = None,
    max_retries: int = 3,
) -> Iterator[tuple[int, Any]]:
    """Run ``fn(*shared, *items[i])`` for every ``i`` as Ray tasks; yield ``(i, result)`` as they finish.

    ``fn`` must be importable on the workers (a module-level function of an installed package) or
    picklable by value; ``shared`` objects are put into Ray's object store once and passed to every
    task by reference (e.g. a scenario).  Each task asks for one CPU.  At most ``workers`` tasks are
    in flight (default: the cluster's CPUs), so a long sweep does not queue everything at once and
    results arrive steadily.  Results of tasks that finished are never lost: a task whose worker
    dies is retried, up to ``max_retries`` times, on any live worker.

    Uses :func:`ray_session` (a running Ray is reused; one started here is shut down when the
    iterator is exhausted or closed).

    :raises InvalidInput: for ``workers < 1`` or ``max_retries < 0``.
    :raises ray.exceptions.RayTaskError: if ``fn`` raises (the original exception is its cause);
        ``ray.exceptions.WorkerCrashedError`` once the retries are used up.
    """
    check_backend("ray", address, workers)
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise InvalidInput(f"max_retries = {max_retries!r}; expected an integer >= 0")
    if not items:
        return
    with ray_session(address, workers) as ray:
        limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        remote = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(fn)
        shared_refs = [ray.put(obj) for obj in shared]
        pending: dict[Any, int] = {}
        queue = iter(range(len(items)))

        def submit() -> None:
            for i in queue:
                pending[remote.remote(*shared_refs, *items[i])] = i
                if len(pending) >= limit:
                    return

        try:
            submit()
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    i = pending.pop(ref)
                    yield i, ray.get(ref)
                submit()
        finally:
            for ref in pending:  # an error or an abandoned iterator: stop what is still queued or running
                ray.cancel(ref, force=True)
