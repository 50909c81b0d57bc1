"""The env's named proposer sets built on reference heuristics (``GeoSchedEnv(proposers="best")`` and friends).

:data:`sfenv.env.proposers.PROPOSER_SET_FACTORIES` names the functions here as ``"module:function"``
strings, imported only when a set is asked for, so the env layer never imports agents.  Each
function takes ``(queue_window, cache)`` and returns the proposers in candidate order.
"""

from __future__ import annotations

from sfenv.agents.carbon import ForecastCarbonAgent, LowestCarbonAgent
from sfenv.agents.ordering import DecisionProposer, FirstFitProposer, SpinSearchProposer, ordered_class
from sfenv.agents.spantrain import SpanTrainAgent

from sfenv.env.proposers import CandidateProposer, PathProposer, PlanCache, SingleRegionProposer

__all__ = ["best", "best_heuristic_proposers", "best_spantrain", "carbon", "first_fit", "first_fit_spantrain"]


def best_heuristic_proposers(queue_window: int = 8, cache: PlanCache | None = None,
                             spantrain: bool = False, spinsearch: bool = True) -> list[CandidateProposer]:
    """Proposers whose candidates hold the decisions of the fastest, fifo, spantrain and spinsearch heuristics (+swf).

    Pass them as ``GeoSchedEnv(proposers=...)`` or ``proposers="best"`` so that a policy can always
    do what the strongest fast heuristics on the contended scenarios do (see
    ``experiments/scenario_spread.py``), and choose between them:

    1. :class:`sfenv.agents.ordering.FirstFitProposer` (``fastest``, ``swf``): the decision of
       ``fastest+swf``, always candidate 0 when there is one;
    2. the same with ``fifo`` placement: the decision of ``fifo+swf``;
    3. with ``spantrain=True`` (``proposers="best+spantrain"``) only,
       :class:`sfenv.agents.ordering.DecisionProposer`: the decision of ``spantrain+swf`` (the best
       heuristic on the contended scenarios; its re-plans are not taken).  SpanTrain decides
       slowly: it remembers its decisions per platform state, but each new state's zero-bubble
       plans are replayed event by event (:mod:`sfenv.model.pipeline`; compiled with the ``fast``
       extra), so on spider-64 the env makes about 40 % of ``"best"``'s masked steps per second
       (``python -m sfenv.experiments.bench_env --proposers``; docs/benchmarks.md, "Candidate
       proposers");
    4. :class:`sfenv.agents.ordering.SpinSearchProposer` (``swf``): the decision of
       ``spinsearch+swf`` and SpinSearch's plan for every job in the queue window;
    5. :class:`~sfenv.env.proposers.SingleRegionProposer` and 6.
       :class:`~sfenv.env.proposers.PathProposer`, as in :func:`sfenv.env.proposers.default_proposers`.

    The decision proposers record their decision (``.decision``,
    :class:`~sfenv.env.proposers.DecisionRecorder`), the expert actions of the behaviour-cloning
    warm start (:mod:`sfenv.agents.imitation`).  Not the default: SpinSearch's multi-region plans
    are fitted per state of their links, which leaves the environment about an eighth of its steps
    per second on spider-8-contended and a fifteenth on spider-64 (same runs).

    :param queue_window: the env's ``queue_window`` (jobs that get a plan each).
    :param cache: plan cache to share (default: a new one).
    :param spantrain: add ``spantrain+swf``'s decision (3. above).
    :param spinsearch: add SpinSearch's decision and plans (4. above; without them, ``proposers="first-fit"``:
        the first-fit decisions and the default proposers only, the cheapest set that records a decision).
    """
    cache = PlanCache() if cache is None else cache
    return [FirstFitProposer(cache, order="swf", placement="fastest"), FirstFitProposer(cache, order="swf"),
            *([DecisionProposer(ordered_class(SpanTrainAgent, "spantrain", "swf")())] if spantrain else []),
            *([SpinSearchProposer(cache, order="swf", jobs=queue_window)] if spinsearch else []),
            SingleRegionProposer(cache, jobs=queue_window), PathProposer(cache)]


def first_fit(queue_window: int, cache: PlanCache) -> list[CandidateProposer]:
    """The set ``"first-fit"``: the decisions of ``fastest+swf`` and ``fifo+swf``, then the default proposers."""
    return best_heuristic_proposers(queue_window, cache, spinsearch=False)


def first_fit_spantrain(queue_window: int, cache: PlanCache) -> list[CandidateProposer]:
    """The set ``"first-fit+spantrain"``: ``"first-fit"`` with ``spantrain+swf``'s decision."""
    return best_heuristic_proposers(queue_window, cache, spantrain=True, spinsearch=False)


def best(queue_window: int, cache: PlanCache) -> list[CandidateProposer]:
    """The set ``"best"``: ``"first-fit"`` with ``spinsearch+swf``'s decision and SpinSearch's plans."""
    return best_heuristic_proposers(queue_window, cache)


def best_spantrain(queue_window: int, cache: PlanCache) -> list[CandidateProposer]:
    """The set ``"best+spantrain"``: ``"best"`` with ``spantrain+swf``'s decision."""
    return best_heuristic_proposers(queue_window, cache, spantrain=True)


def carbon(queue_window: int, cache: PlanCache) -> list[CandidateProposer]:
    """The set ``"carbon"``: ``"first-fit+spantrain"`` with the decisions of two carbon-aware heuristics.

    In candidate order: the decisions of ``fastest+swf``, ``fifo+swf``, ``spantrain+swf``,
    ``forecast-carbon+swf`` (least forecast carbon over the job's run) and ``lowest-carbon+swf``
    (lowest intensity now) (:mod:`sfenv.agents.carbon`), then the default proposers.  A policy can
    then always do what the fastest and the carbon-aware heuristics do, and choose between them state
    by state (the ``carbon-rollout`` recipe).  SpinSearch's plans are left out: they are slow to fit
    and move work across regions, which the egress weight of a carbon scenario charges.
    """
    return [FirstFitProposer(cache, order="swf", placement="fastest"), FirstFitProposer(cache, order="swf"),
            DecisionProposer(ordered_class(SpanTrainAgent, "spantrain", "swf")()),
            DecisionProposer(ordered_class(ForecastCarbonAgent, "forecast-carbon", "swf")()),
            DecisionProposer(ordered_class(LowestCarbonAgent, "lowest-carbon", "swf")()),
            SingleRegionProposer(cache, jobs=queue_window), PathProposer(cache)]
