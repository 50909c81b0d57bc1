"""Genetic baseline after DT-FM (Yuan et al., NeurIPS 2022), built on pymoo.

Follows the source [code, DS3Lab/DT-FM ``scheduler/heuristic_evolutionary_solver``]
    - An evolutionary search over which devices form which pipeline stages and in what order,
      scored by a communication-aware cost model; crossover on parent pairs, repair, and a
      local search on the result; the number of cost evaluations is the budget.
    - DT-FM's seeding bugs (``random.seed = i`` assigns instead of seeding) are fixed by
      construction: every random draw comes from the agent's generator, seeded by :meth:`reset`.

Our design
    - Granularity: clusters, not single GPUs (a stage's data-parallel replicas stay in a
      cluster).  A chromosome is a permutation of the clusters with free GPUs plus one *stop*
      gene; decoding walks it and takes clusters (all their free GPUs, up to ``max_gpus`` in
      total) until it has passed the stop gene and holds the job's ``min_gpus``, or holds
      ``max_gpus``.  So the chromosome carries the number
      of clusters, hence the GPU count: a job may run on one small fast cluster rather than the
      largest one.  [An earlier decoder fixed the GPU target at the largest free cluster: on
      spider-8 it had to take 64 A100 or more when 32 H100 model faster.]  The decoded chain is
      the pipeline order, and :func:`sfenv.model.planning.fit_plan` builds its plan.
    - Fitness = the performance model's iteration time of that plan (compute included, unlike
      DT-FM's communication-only cost).  An evaluation (trial) is one fitness call; decoded
      chains are memoised, so repeated trials cost a dictionary look-up.
    - Machinery from pymoo: ``GA`` with ``PermutationRandomSampling``, ``OrderCrossover``,
      ``InversionMutation`` and duplicate elimination (pymoo keeps permutations valid, so no
      separate repair step is needed).  Duplicates are eliminated by decoded chain, not by
      permutation (:meth:`ChainFitness.phenotype`): permutations that share a chain prefix are one
      plan, and without this the population collapsed onto one chain and lost to random search at
      equal evaluations.  Then a first-improvement swap local search on the best chromosome (DT-FM
      uses a cyclic-partitioning local search) that spends the rest of the budget when the GA
      stops early for want of new chains.
    - Budget.  ``budget="dtfm"`` is DT-FM's size [code]: population 100 and 4,900 trials
      (48 generations of 100 = 4,800 GA evaluations, plus 100 local-search moves); one of our
      trials is one fitness evaluation, while a DT-FM trial also runs a local search, so this is
      less work than DT-FM's own budget.  The default (population 24, 30 generations, 30
      local-search moves: 750 trials) is 15 % of it [our choice, for a fair baseline: with the
      calibrated performance model, at the earlier default of 10 generations (270 trials) the GA
      was no better than random search at equal evaluations on a 16-cluster decision (12 GA seeds
      on spider-16's seed-0 state: mean best 7.16 s against 7.15 s; on validation seed 10,000's
      state 6.92 against 7.27); at 30 generations it is clearly better (4.23 against 6.26 s and
      4.52 against 6.53; 11 of 12 seeds on the validation state).  Three budgets were tried: 10,
      20 and 30 generations.  A decision then costs about 3x the earlier one].
    - Queue: arrival order with backfilling.

Parameters
    population, generations: GA size.  local_search: swap moves after the GA (evaluation budget
    ``local_search_evals``).  seed: default seed of the generator.  budget: ``"dtfm"`` sets
    population, generations and local-search moves to DT-FM's size (the explicit arguments are
    then ignored); None keeps them.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable

import numpy as np
from sfenv.agents.base import SchedulerAgent

from sfenv.model.perf import Plan, PlanPerf
from sfenv.model.planning import fit_plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec

__all__ = ["BUDGETS", "ChainFitness", "GeneticAgent", "random_search"]

#: named budgets: (population, generations, local-search moves)
BUDGETS: dict[str, tuple[int, int, int]] = {
    "default": (24, 30, 30),  # 750 trials (see the module docstring for why)
    "dtfm": (100, 48, 100),  # DT-FM's population 100 and 4,900 trials
}


class ChainFitness:
    """Decode chromosomes over ``regions`` into chains and score them (memoised, evaluations counted).

    A chromosome is a permutation of ``0..len(regions)``: indices into ``regions`` plus the stop
    gene ``len(regions)`` (see the module docstring).
    """

    def __init__(self, view: SimView, job: JobSpec, regions: list[int]):
        self.view, self.job, self.regions = view, job, regions
        free = view.free_gpus
        self.free = [int(free[r]) for r in regions]
        self.stop = len(regions)
        self.cache: dict[tuple, tuple[float, tuple[Plan, PlanPerf] | None]] = {}
        self.evaluations = 0
        self.history: list[float] = []

    @property
    def genes(self) -> int:
        """Chromosome length: the regions and the stop gene."""
        return len(self.regions) + 1

    def decode(self, perm: np.ndarray) -> tuple[list[int], list[int]]:
        """Chain (region ids) and GPU budgets for a chromosome."""
        chain, budget, total, stopped = [], [], 0, False
        for i in perm:
            i = int(i)
            if total >= self.job.max_gpus or (stopped and total >= self.job.min_gpus):
                break
            if i == self.stop:
                stopped = True
                continue
            take = min(self.free[i], self.job.max_gpus - total)
            chain.append(self.regions[i])
            budget.append(take)
            total += take
        return chain, budget

    def phenotype(self, perm: np.ndarray) -> np.ndarray:
        """A vector equal for two chromosomes exactly when they decode to the same chain.

        Entry ``i`` is 1 + the position of gene ``i`` in the decoded chain, 0 when the chain does
        not use it (budgets follow from the chain).  The GA eliminates duplicates on it: many
        permutations share a chain prefix, and a population of distinct permutations can otherwise
        hold a single chain many times over.
        """
        out = np.zeros(self.stop, dtype=float)
        chain, _ = self.decode(perm)
        index = {r: i for i, r in enumerate(self.regions)}
        for pos, r in enumerate(chain):
            out[index[r]] = pos + 1
        return out

    def __call__(self, perm: np.ndarray) -> float:
        """Iteration time of the decoded chain's plan (inf if none fits)."""
        self.evaluations += 1
        chain, budget = self.decode(perm)
        key = (tuple(chain), tuple(budget))
        if key not in self.cache:
            ok = bool(chain) and sum(budget) >= self.job.min_gpus
            res = fit_plan(self.job, self.view.topo, chain, budget, self.view.evaluate) if ok else None
            self.cache[key] = (res[1].iter_time if res else math.inf, res)
        value = self.cache[key][0]
        self.history.append(value)
        return value

    def plan(self, perm: np.ndarray) -> tuple[Plan, PlanPerf] | None:
        """The plan of a chromosome."""
        self(perm)
        chain, budget = self.decode(perm)
        return self.cache[(tuple(chain), tuple(budget))][1]


def random_search(fitness: Callable[[np.ndarray], float], n: int, evaluations: int, rng: np.random.Generator) -> float:
    """Best fitness over ``evaluations`` random permutations of ``n`` genes (DT-FM's comparison baseline)."""
    return min(fitness(rng.permutation(n)) for _ in range(evaluations))


#: the pymoo modules :meth:`GeneticAgent.optimise` imports (lazily: importing sfenv does not import pymoo)
_PYMOO_MODULES = ("pymoo.algorithms.soo.nonconvex.ga", "pymoo.core.duplicate", "pymoo.core.problem",
                  "pymoo.operators.crossover.ox", "pymoo.operators.mutation.inversion",
                  "pymoo.operators.sampling.rnd", "pymoo.optimize")


class GeneticAgent(SchedulerAgent):
    """DT-FM-style genetic placement (see the module docstring)."""

    name = "genetic"

    def __init__(self, population: int = 24, generations: int = 30, local_search: bool = True,
                 local_search_evals: int = 30, seed: int = 0, budget: str | None = None):
        if budget is not None:
            if budget not in BUDGETS:
                raise ValueError(f"unknown budget {budget!r}; known: {', '.join(BUDGETS)}")
            population, generations, local_search_evals = BUDGETS[budget]
        self.population = population
        self.generations = generations
        self.local_search = local_search
        self.local_search_evals = local_search_evals
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.evaluations = 0
        self.last: ChainFitness | None = None

    @property
    def trials(self) -> int:
        """Fitness evaluations per decision at this budget (pymoo's GA: population x generations)."""
        return self.population * self.generations + (self.local_search_evals if self.local_search else 0)

    def prepare(self) -> None:
        """Import pymoo's GA machinery now (about 0.1-0.2 s once per process), not inside the first timed decision."""
        for module in _PYMOO_MODULES:
            importlib.import_module(module)

    def reset(self, seed: int | None = None) -> None:
        """Re-seed the generator and reset the counter."""
        self.rng = np.random.default_rng(self.seed if seed is None else seed)
        self.evaluations = 0

    def optimise(self, fitness: ChainFitness, n: int) -> np.ndarray:
        """Run the GA (pymoo) and the local search over chromosomes of ``n`` genes; returns the best."""
        from pymoo.algorithms.soo.nonconvex.ga import GA
        from pymoo.core.duplicate import DefaultDuplicateElimination
        from pymoo.core.problem import ElementwiseProblem
        from pymoo.operators.crossover.ox import OrderCrossover
        from pymoo.operators.mutation.inversion import InversionMutation
        from pymoo.operators.sampling.rnd import PermutationRandomSampling
        from pymoo.optimize import minimize

        if n <= 2:  # one region (and the stop gene): nothing to search
            best = np.arange(n, dtype=int)
            fitness(best)
            return best

        class _Problem(ElementwiseProblem):
            def __init__(self) -> None:
                super().__init__(n_var=n, n_obj=1, xl=0, xu=n - 1, vtype=int)

            def _evaluate(self, x, out, *args, **kwargs):
                out["F"] = fitness(np.asarray(x, dtype=int))

        def phenotypes(pop) -> np.ndarray:
            return np.array([fitness.phenotype(np.asarray(x, dtype=int)) for x in pop.get("X")])

        algo = GA(pop_size=self.population, sampling=PermutationRandomSampling(), crossover=OrderCrossover(),
                  mutation=InversionMutation(), eliminate_duplicates=DefaultDuplicateElimination(func=phenotypes))
        res = minimize(_Problem(), algo, ("n_gen", self.generations), seed=int(self.rng.integers(2**31 - 1)),
                       verbose=False)
        best = np.asarray(res.X, dtype=int)
        best_f = float(np.atleast_1d(res.F)[0])
        if self.local_search:
            # the local search takes the rest of the budget: pymoo stops early when mating finds no
            # offspring with a new chain (small platforms hold few distinct chains)
            start = fitness.evaluations
            moves = max(self.local_search_evals, self.trials - start)
            for _ in range(moves):
                i, j = self.rng.choice(n, size=2, replace=False)
                cand = best.copy()
                cand[i], cand[j] = cand[j], cand[i]
                f = fitness(cand)
                if f < best_f:
                    best, best_f = cand, f
        return best

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The best plan the search finds for ``job`` now, if any."""
        free = view.free_gpus
        regions = [r for r in range(view.topo.num_regions) if free[r] > 0]
        if sum(int(free[r]) for r in regions) < job.min_gpus:
            return []
        fitness = ChainFitness(view, job, regions)
        best = self.optimise(fitness, fitness.genes)
        self.evaluations += fitness.evaluations
        self.last = fitness
        res = fitness.plan(best)
        return [] if res is None else [res[0]]
