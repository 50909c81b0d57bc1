"""Small constructed worlds for agent behaviour tests."""

from __future__ import annotations

import numpy as np

from sfenv.sim import SimConfig, Simulator
from sfenv.world.hardware import get_gpu
from sfenv.world.prices import PriceSeries
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import MODEL_ZOO, JobSpec


def region(name: str, gpus: int, zone: str, gpu: str = "A100-80GB") -> Region:
    return Region(name=name, gpu=get_gpu(gpu), num_gpus=gpus, zone=zone)


def world(regions: list[Region], links: list[Link], prices: dict[str, float], jobs: list[JobSpec],
          config: SimConfig | None = None) -> Simulator:
    zones = sorted(prices)
    ps = PriceSeries(zones, np.array([[prices[z]] * 24 for z in zones]))
    return Simulator(Topology(regions, links), ps, jobs, config or SimConfig())


def job(job_id: int, model: str = "gpt-1.3b", iterations: int = 200, arrival: float = 0.0, min_gpus: int = 8,
        max_gpus: int = 64, batch: int = 256) -> JobSpec:
    return JobSpec(job_id, MODEL_ZOO[model], batch, iterations, arrival, min_gpus, max_gpus)
