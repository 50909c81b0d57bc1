"""GPU catalogue: vendor peak figures used by the performance model.

Peak dense tensor TFLOP/s (BF16, or FP16 with FP32 accumulate where a part has no BF16),
memory and board power come from the vendors' datasheets, as summarised (with cross-checks) in
the project's research notes on GPU specs:

- H100 SXM5 / PCIe, H200: NVIDIA H100 datasheet and product page; NVIDIA H200 product page;
  H100 PCIe product brief PB-11133-001_v02.
- A100 SXM4 40/80 GB, A100 PCIe: NVIDIA A100 datasheet (nvidia-a100-datasheet-us-...-r4).
- V100 SXM2 / PCIe: NVIDIA Tesla V100 datasheet (FP16 tensor, FP32 accumulate; no BF16).
- A10, L4, L40S, T4, P100, P40: the respective NVIDIA product pages / datasheets.
- RTX 4090: Ada Lovelace architecture whitepaper (FP16 tensor with FP32 accumulate, dense).
- RTX A6000: NVIDIA RTX A6000 datasheet (309.7 tensor TFLOP/s with sparsity, so 154.8 dense;
  48 GB GDDR6; 300 W).  Used by BACE-Pipe's evaluation.
- RTX 3090: NVIDIA Ampere GA102 whitepaper (71 dense FP16-tensor TFLOP/s with FP32 accumulate;
  24 GB GDDR6X; 350 W).  Used by SpanTrain's test plan.

Intra-node GPU-to-GPU bandwidth (``link_gbs``, GB/s per direction, used by tensor-parallel
all-reduces): NVLink figures are the datasheets' bidirectional totals halved (H100/H200 SXM NVLink 4
900 GB/s -> 450; A100 SXM NVLink 3 600 -> 300; V100 SXM2 NVLink 2 300 -> 150); PCIe parts use the
PCIe x16 link per direction (PCI-SIG: Gen3 15.75 GB/s, Gen4 31.5, Gen5 63): H100 PCIe Gen5; A100
PCIe, A10, L4, L40S, RTX 4090, RTX A6000, RTX 3090 Gen4 (the optional 2-GPU NVLink bridges of some
PCIe parts are ignored: they do not span an 8-GPU server); V100 PCIe, T4, P100 PCIe, P40 Gen3.

Idle power is **our assumption** (vendors do not publish it): roughly a fifth to a quarter of the
board power, in line with what ``nvidia-smi`` reports for idle data-centre parts.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GPUSpec", "GPU_CATALOGUE", "get_gpu"]


@dataclass(frozen=True)
class GPUSpec:
    """Static figures of one GPU model.

    :param name: catalogue key, e.g. ``"A100-80GB"``.
    :param tflops: peak dense BF16 (or FP16/FP32-accumulate) tensor TFLOP/s.
    :param memory_gb: device memory in GB (1e9 bytes).
    :param tdp_w: board power (TDP) in watts.
    :param idle_w: idle power in watts (our assumption, see module docstring).
    :param link_gbs: intra-node GPU-to-GPU bandwidth per direction, GB/s (NVLink or PCIe).
    """

    name: str
    tflops: float
    memory_gb: float
    tdp_w: float
    idle_w: float
    link_gbs: float = 31.5

    @property
    def flops(self) -> float:
        """Peak FLOP/s."""
        return self.tflops * 1e12

    @property
    def link_bps(self) -> float:
        """Intra-node GPU-to-GPU bandwidth per direction, bit/s."""
        return self.link_gbs * 8e9

    @property
    def memory_bytes(self) -> float:
        """Device memory in bytes."""
        return self.memory_gb * 1e9


GPU_CATALOGUE: dict[str, GPUSpec] = {
    g.name: g
    for g in [
        GPUSpec("H100-SXM", 989.0, 80.0, 700.0, 90.0, 450),
        GPUSpec("H100-PCIe", 756.0, 80.0, 350.0, 60.0, 63),
        GPUSpec("H200", 989.0, 141.0, 700.0, 90.0, 450),
        GPUSpec("A100-80GB", 312.0, 80.0, 400.0, 60.0, 300),
        GPUSpec("A100-40GB", 312.0, 40.0, 400.0, 55.0, 300),
        GPUSpec("A100-PCIe", 312.0, 80.0, 300.0, 50.0, 31.5),
        GPUSpec("V100", 125.0, 32.0, 300.0, 50.0, 150),
        GPUSpec("V100-PCIe", 112.0, 32.0, 250.0, 40.0, 15.75),
        GPUSpec("A10", 125.0, 24.0, 150.0, 30.0, 31.5),
        GPUSpec("L4", 121.0, 24.0, 72.0, 16.0, 31.5),
        GPUSpec("L40S", 362.0, 48.0, 350.0, 60.0, 31.5),
        GPUSpec("RTX4090", 165.2, 24.0, 450.0, 30.0, 31.5),
        GPUSpec("A6000", 154.8, 48.0, 300.0, 30.0, 31.5),
        GPUSpec("RTX3090", 71.0, 24.0, 350.0, 30.0, 31.5),
        GPUSpec("T4", 65.0, 16.0, 70.0, 12.0, 15.75),
        GPUSpec("P100", 18.7, 16.0, 250.0, 30.0, 15.75),
        GPUSpec("P40", 12.0, 24.0, 250.0, 30.0, 15.75),
    ]
}


def get_gpu(name: str) -> GPUSpec:
    """Return the catalogue entry for ``name``.

    :raises KeyError: with the list of known GPU types if ``name`` is unknown.
    """
    try:
        return GPU_CATALOGUE[name]
    except KeyError:
        known = ", ".join(sorted(GPU_CATALOGUE))
        raise KeyError(f"unknown GPU type {name!r}; expected one of: {known}") from None
