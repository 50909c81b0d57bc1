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

from sfenv.errors import UnknownName, did_you_mean
from sfenv.hashing import cached_hash, state_without_hash

__all__ = ["A100_KERNELS", "EAGER_MEM_TRAFFIC", "GPU_CATALOGUE", "GPUSpec", "KernelModel", "get_gpu"]


@dataclass(frozen=True)
class KernelModel:
    """How fast one GPU type runs a transformer layer's kernels (see :mod:`sfenv.model.compute`).

    Few, physical parameters, fitted on measured Megatron runs on A100 (``fit_kernel_model`` in
    :mod:`sfenv.experiments.validate_model`); other GPU types are scaled from them by vendor ratios
    (:meth:`scaled`).

    :param gemm_eff_max: fraction of the peak tensor FLOP/s a large GEMM reaches.
    :param gemm_half_s: a GEMM of W FLOPs takes ``W / (gemm_eff_max F) + gemm_half_s`` (Hockney's
        half-performance size ``n_1/2 = gemm_half_s * gemm_eff_max * F``: small GEMMs run far below
        peak because of tile and wave quantisation and launch latency), seconds.
    :param mem_traffic: HBM bytes moved by the memory-bound kernels (layernorm, softmax, dropout,
        GeLU, residual adds) of one layer's forward and backward, per byte of activation it stores
        without recomputation (Korthikanti et al. 2022's count); divided by 3 per forward pass.
    :param layer_overhead_s: fixed time per layer and forward pass (launches, framework), seconds.
    :param tp_step_latency_s: latency of one step of a ring all-reduce over the server link
        (``2 (t-1)`` steps per all-reduce), seconds.
    :param tp_bus_eff: fraction of the server link's bandwidth a tensor-parallel all-reduce achieves.
    :param source: where the figures come from.
    """

    gemm_eff_max: float
    gemm_half_s: float
    mem_traffic: float
    layer_overhead_s: float
    tp_step_latency_s: float
    tp_bus_eff: float
    source: str = ""

    __hash__ = cached_hash  # GPU types key the per-shape compute caches
    __getstate__ = state_without_hash

    def scaled(self, source: str) -> KernelModel:
        """The same kernel model for another GPU type.

        Dimensionless figures (GEMM efficiency, memory traffic per byte, bus efficiency) and
        latencies are kept; the GPU's own peak FLOP/s, HBM bandwidth and link bandwidth (vendor
        datasheets) then set its times.  An assumption, stated as such: no measured runs on other
        GPU types were used.
        """
        return KernelModel(self.gemm_eff_max, self.gemm_half_s, self.mem_traffic, self.layer_overhead_s,
                           self.tp_step_latency_s, self.tp_bus_eff, source)

    def eager(self) -> KernelModel:
        """The same GPU running unfused ("eager") training code: :data:`EAGER_MEM_TRAFFIC` as ``mem_traffic``.

        The fitted figures come from Megatron runs whose elementwise work (layernorm, scale, mask,
        softmax, dropout, bias, GeLU, residual adds) runs in a few fused kernels.  Code that launches
        one PyTorch kernel per elementwise operation reads and writes each intermediate tensor in HBM
        again, so only the memory-bound term changes: GEMMs, latencies and links stay.  Used for
        the code that was written that way (Megatron-LM 2019, DT-FM's ``modules/gpt_modules.py``);
        the catalogue's GPUs keep the fused figures.
        """
        return KernelModel(self.gemm_eff_max, self.gemm_half_s, EAGER_MEM_TRAFFIC, self.layer_overhead_s,
                           self.tp_step_latency_s, self.tp_bus_eff,
                           f"{self.source}; memory-bound traffic of unfused kernels (Megatron-LM 2019 on V100)")


# Fitted by ``python -m sfenv.experiments.validate_model --fit`` on the measured Megatron runs on
# A100-80GB of vTrain (Bang et al., MICRO 2024; 1,440 single-server runs and the 35 multi-node runs
# with TP <= 8 of the 3.6B and 18.4B models), least squares on log(model / measured).
A100_KERNELS = KernelModel(
    gemm_eff_max=0.770,
    gemm_half_s=140.7e-6,
    mem_traffic=7.48,
    layer_overhead_s=0.0,  # fitted to 0: the GEMMs' fixed time already carries the per-layer overhead
    tp_step_latency_s=20.9e-6,
    tp_bus_eff=1.0,  # fitted at its bound: NVLink all-reduces are latency-, not bandwidth-limited here
    source="fitted on vTrain's measured Megatron runs on A100 (MICRO 2024)",
)


# HBM bytes of the memory-bound kernels per activation byte when every elementwise operation is its own
# kernel (:meth:`KernelModel.eager`).  Fitted, as the one free figure, on one published point
# (``python -m sfenv.experiments.validate_model``, ``fit_eager_traffic``): Megatron-LM's 2019 single-V100
# baseline, the 1.2B model of its Table 1 at 39 TFLOP/s (Shoeybi et al., arXiv 1909.08053, section 5.1),
# with the V100 kernel figures scaled from A100 as the catalogue does; checked on the same paper's
# 2-512 GPU runs, held out.  2.5 times the fused code's 7.48.
EAGER_MEM_TRAFFIC = 18.67


@dataclass(frozen=True)
class GPUSpec:
    """Static figures of one GPU model.

    :param name: catalogue key, e.g. ``"A100-80GB"``.
    :param tflops: peak dense BF16 (or FP16/FP32-accumulate) tensor TFLOP/s.
    :param memory_gb: device memory in GB (1e9 bytes).
    :param tdp_w: board power (TDP) in watts.
    :param idle_w: idle power in watts (our assumption, see module docstring).
    :param link_gbs: intra-node GPU-to-GPU bandwidth per direction, GB/s (NVLink or PCIe).
    :param hbm_gbs: device memory bandwidth, GB/s (vendor datasheet; 0: unknown).
    :param kernels: the kernel-efficiency model (:class:`KernelModel`); None: the flat
        :attr:`sfenv.model.perf.PerfParams.mfu` is used instead.
    """

    name: str
    tflops: float
    memory_gb: float
    tdp_w: float
    idle_w: float
    link_gbs: float = 31.5
    hbm_gbs: float = 0.0
    kernels: KernelModel | None = None

    __hash__ = cached_hash
    __getstate__ = state_without_hash

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


def _gpu(name: str, tflops: float, memory_gb: float, tdp_w: float, idle_w: float, link_gbs: float,
         hbm_gbs: float) -> GPUSpec:
    kernels = A100_KERNELS if name.startswith("A100") else A100_KERNELS.scaled(
        "A100's fitted kernel model, scaled by vendor peak FLOP/s, HBM and link bandwidth")
    return GPUSpec(name, tflops, memory_gb, tdp_w, idle_w, link_gbs, hbm_gbs, kernels)


# HBM bandwidth (GB/s): the project's GPU-spec notes (vendor datasheets); RTX A6000 768 and
# RTX 3090 936 from their NVIDIA datasheets.
GPU_CATALOGUE: dict[str, GPUSpec] = {
    g.name: g
    for g in [
        _gpu("H100-SXM", 989.0, 80.0, 700.0, 90.0, 450, 3350),
        _gpu("H100-PCIe", 756.0, 80.0, 350.0, 60.0, 63, 2000),
        _gpu("H200", 989.0, 141.0, 700.0, 90.0, 450, 4800),
        _gpu("A100-80GB", 312.0, 80.0, 400.0, 60.0, 300, 2039),
        _gpu("A100-40GB", 312.0, 40.0, 400.0, 55.0, 300, 1555),
        _gpu("A100-PCIe", 312.0, 80.0, 300.0, 50.0, 31.5, 1935),
        _gpu("V100", 125.0, 32.0, 300.0, 50.0, 150, 900),
        _gpu("V100-PCIe", 112.0, 32.0, 250.0, 40.0, 15.75, 900),
        _gpu("A10", 125.0, 24.0, 150.0, 30.0, 31.5, 600),
        _gpu("L4", 121.0, 24.0, 72.0, 16.0, 31.5, 300),
        _gpu("L40S", 362.0, 48.0, 350.0, 60.0, 31.5, 864),
        _gpu("RTX4090", 165.2, 24.0, 450.0, 30.0, 31.5, 1008),
        _gpu("A6000", 154.8, 48.0, 300.0, 30.0, 31.5, 768),
        _gpu("RTX3090", 71.0, 24.0, 350.0, 30.0, 31.5, 936),
        _gpu("T4", 65.0, 16.0, 70.0, 12.0, 15.75, 320),
        _gpu("P100", 18.7, 16.0, 250.0, 30.0, 15.75, 732),
        _gpu("P40", 12.0, 24.0, 250.0, 30.0, 15.75, 346),
    ]
}


def get_gpu(name: str) -> GPUSpec:
    """Return the catalogue entry for ``name``.

    :raises UnknownName: (a ``KeyError``) with the closest and the known GPU types if ``name`` is unknown.
    """
    try:
        return GPU_CATALOGUE[name]
    except (KeyError, TypeError):  # TypeError: an unhashable name (a list)
        known = ", ".join(sorted(GPU_CATALOGUE))
        raise UnknownName(f"unknown GPU type {name!r}{did_you_mean(name, GPU_CATALOGUE)}; "
                          f"expected one of: {known}") from None
