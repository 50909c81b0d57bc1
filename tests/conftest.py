"""Shared builders for small hand-made worlds."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import settings

from sfenv.model.perf import PerfParams
from sfenv.world.hardware import GPUSpec
from sfenv.world.prices import PriceSeries
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import JobSpec, ModelSpec

# Property tests draw the same examples on every run and machine (CI included), so a failure is
# reproducible, never a coin flip; HYPOTHESIS_PROFILE=explore draws fresh examples (and keeps
# failing ones in .hypothesis/) to look for counterexamples.
settings.register_profile("sfenv", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "sfenv"))

# A round-number GPU so hand computations stay readable.
TOY_GPU = GPUSpec("toy", tflops=100.0, memory_gb=80.0, tdp_w=400.0, idle_w=100.0)
TOY_MODEL = ModelSpec("toy-model", layers=4, hidden=1024, heads=8, seq_len=1024, vocab=0)


def make_region(name: str, gpus: int = 8, gpu: GPUSpec = TOY_GPU, zone: str = "z0", pue: float = 1.0,
                intra_bw_gbps: float = 100.0, intra_latency_ms: float = 0.0) -> Region:
    return Region(name=name, gpu=gpu, num_gpus=gpus, zone=zone, pue=pue, intra_bw_gbps=intra_bw_gbps,
                  intra_latency_ms=intra_latency_ms)


def two_region_topo(bw_gbps: float = 1.0, lat_ms: float = 20.0, gpus: int = 8, **kw) -> Topology:
    return Topology([make_region("A", gpus, **kw), make_region("B", gpus, **kw)], [Link(0, 1, bw_gbps, lat_ms)])


def make_job(job_id: int = 0, model: ModelSpec = TOY_MODEL, batch: int = 8, iterations: int = 100,
             arrival: float = 0.0, min_gpus: int = 1, max_gpus: int = 1024) -> JobSpec:
    return JobSpec(job_id, model, batch, iterations, arrival, min_gpus, max_gpus)


def flat_prices(zones=("z0",), price: float = 100.0) -> PriceSeries:
    return PriceSeries(list(zones), np.full((len(zones), 24), price))


@pytest.fixture
def params() -> PerfParams:
    return PerfParams(mfu=0.5, dp_overlap=0.0, memory_headroom=1.0)


def check_link_load(sim) -> None:
    """The link state holds exactly the running jobs' traffic: its load is their loads' sum, on their flows' links."""
    load = np.zeros_like(sim.links.load)
    for jid, entry in sim.links.jobs.items():
        js = sim.jobs[jid]
        assert js.status == "running" and set(js.flows) == {int(e) for e in entry.links}
        load[:, entry.links] += entry.load
    assert all(jid in sim.links.jobs for jid in sim.running if sim.jobs[jid].flows)
    assert np.allclose(load, sim.links.load), "link load out of sync"
