"""Compute time and activation memory of one transformer layer on one GPU (pure functions).

FLOPs are counted as Megatron-LM does (Narayanan et al., SC'21, section 5.1 / appendix): per
layer and micro-batch of ``b`` sequences of ``s`` tokens, hidden size ``h``, the forward pass does
``24 b s h^2`` FLOPs of linear layers (QKV 6, output projection 2, MLP 16) and ``4 b s^2 h`` of
attention matmuls (scores and context), i.e. ``24 b s h^2 (1 + s / (6 h))``; the backward pass twice
that.  The LM head does ``2 b s h V`` forward (``V`` the vocabulary), never recomputed.  Summed over
an iteration with full recomputation this is Megatron's ``96 B s l h^2 (1 + s/(6h) + V/(16 l h))``.

Recomputation modes (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models", MLSys 2023, arXiv 2205.05198):

- ``"none"``: forward + backward (3 forward-equivalents);
- ``"selective"``: the attention core (``QK^T``, softmax, dropout, attention over V) is recomputed:
  its FLOPs and its memory-bound work once more;
- ``"full"``: the whole forward pass once more (4 forward-equivalents), and two more
  tensor-parallel all-reduces.

Time per layer forward on a GPU with a :class:`sfenv.world.hardware.KernelModel` (``e``: ``gemm_eff_max``,
``g``: ``gemm_half_s``, ``F`` peak FLOP/s, ``M`` HBM bandwidth, ``t`` tensor-parallel degree):

- linear GEMMs: ``24 b s h^2 / (t e F) + 4 g`` (four GEMMs); attention: ``4 b s^2 h / (t e F) + 2 g``;
- memory-bound work: ``mem_traffic * A / (3 M)``, ``A`` the layer's activation bytes without
  recomputation on one GPU (Korthikanti's count, below): the elementwise kernels read and write
  about what the layer stores;
- ``layer_overhead_s``.

The backward pass is counted as twice the forward.  Tensor parallelism adds Megatron's two
all-reduces of the ``2 b s h``-byte activation per layer forward and two backward (two more with
full recomputation), each a ring over the server link: ``2 (t-1) tp_step_latency_s + 2 (t-1)/t
bytes / (tp_bus_eff link)``.  Without a kernel model (a GPU type the catalogue does not know) the
compute runs at the flat fraction ``mfu`` of peak with no memory-bound or overhead term.

Activation bytes per layer and micro-batch (Korthikanti et al., Table 2, ``a`` heads):

- no recomputation, no sequence parallelism: ``s b h (10 + 24/t + 5 a s / (h t))``
  (``s b h (34 + 5 a s / h)`` at t = 1);
- no recomputation with sequence parallelism: ``s b h / t (34 + 5 a s / h)``;
- selective recomputation: ``s b h (10 + 24/t)``, with sequence parallelism ``34 s b h / t``;
- full recomputation: ``2 s b h`` (the layer's input only).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from sfenv.world.hardware import GPUSpec

__all__ = ["RECOMPUTE_MODES", "RecomputeMode", "activation_bytes", "layer_costs", "lm_head_time", "stage_unit"]

RecomputeMode = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")  # in order of compute cost


def activation_bytes(s: int, b: int, h: int, heads: int, tp: int, mode: str, sequence_parallel: bool) -> float:
    """Activation bytes one layer holds per micro-batch on one GPU (Korthikanti et al. 2022, Table 2).

    :param s: sequence length.
    :param b: micro-batch size.
    :param h: hidden size.
    :param heads: attention heads a.
    :param tp: tensor-parallel degree t.
    :param mode: ``"none"``, ``"selective"`` or ``"full"`` recomputation.
    :param sequence_parallel: Megatron's sequence parallelism (layernorm and dropout split over t).
    :return: bytes.
    """
    sbh = float(s) * b * h
    if mode == "full":
        return 2.0 * sbh
    attention = 5.0 * heads * s / (h * tp)  # softmax, its dropout mask and output, per s b h
    if mode == "selective":
        return sbh * 34.0 / tp if sequence_parallel else sbh * (10.0 + 24.0 / tp)
    if mode != "none":
        raise ValueError(f"recompute mode {mode!r}: expected one of {RECOMPUTE_MODES}")
    if sequence_parallel:
        return sbh * (34.0 / tp + attention)
    return sbh * (10.0 + 24.0 / tp + attention)


@lru_cache(maxsize=1 << 14)
def layer_costs(
    gpu: GPUSpec, b: int, s: int, h: int, heads: int, tp: int, mode: str, sequence_parallel: bool, mfu: float,
) -> tuple[float, float]:
    """Seconds one layer takes per micro-batch on one GPU, forward and backward: ``(total, tp_comm)``.

    ``total`` includes ``tp_comm``, the tensor-parallel all-reduces (module docstring).  Memoised:
    plan search asks for the same few shapes many times.

    :param gpu: the GPU type (its :attr:`~sfenv.world.hardware.GPUSpec.kernels`, or ``mfu`` without one).
    :param mfu: flat fraction of peak used when the GPU has no kernel model.
    :return: ``(seconds per layer and micro-batch, of which tensor-parallel communication)``.
    """
    flops = gpu.flops
    lin = 24.0 * b * s * h * h / tp
    att = 4.0 * b * s * s * h / tp
    km = gpu.kernels
    link = gpu.link_bps / 8.0  # bytes/s
    if km is None:
        f_lin, f_att = lin / (flops * mfu), att / (flops * mfu)
        mem_rest = mem_att = 0.0
        overhead = 0.0
        step_lat, bus = 0.0, 1.0
    else:
        rate = flops * km.gemm_eff_max
        f_lin, f_att = lin / rate + 4.0 * km.gemm_half_s, att / rate + 2.0 * km.gemm_half_s
        per_byte = km.mem_traffic / (3.0 * gpu.hbm_gbs * 1e9) if gpu.hbm_gbs > 0 else 0.0
        total = activation_bytes(s, b, h, heads, tp, "none", sequence_parallel)
        mem_att = per_byte * 5.0 * heads * s * s * b / tp
        mem_rest = per_byte * total - mem_att
        overhead = km.layer_overhead_s
        step_lat, bus = km.tp_step_latency_s, km.tp_bus_eff
    fwd = f_lin + f_att + mem_rest + mem_att + overhead
    passes = 4.0 if mode == "full" else 3.0
    t = passes * fwd + ((f_att + mem_att) if mode == "selective" else 0.0)
    comm = 0.0
    if tp > 1:
        n_ar = 6.0 if mode == "full" else 4.0
        one = 2.0 * (tp - 1) * step_lat + 2.0 * (tp - 1) / tp * (2.0 * b * s * h) / (link * bus)
        comm = n_ar * one
    return t + comm, comm


@lru_cache(maxsize=1 << 12)
def lm_head_time(gpu: GPUSpec, b: int, s: int, h: int, vocab: int, tp: int, mfu: float) -> float:
    """Seconds of the LM head (``2 b s h V / t`` FLOPs forward, backward twice) per micro-batch.

    One GEMM forward and two backward, each with the kernel model's fixed GEMM time; never
    recomputed (Megatron).  0 without a vocabulary.
    """
    if vocab <= 0:
        return 0.0
    fl = 6.0 * b * s * h * vocab / tp
    km = gpu.kernels
    if km is None:
        return fl / (gpu.flops * mfu)
    return fl / (gpu.flops * km.gemm_eff_max) + 3.0 * km.gemm_half_s


@lru_cache(maxsize=1 << 14)
def stage_unit(
    gpu: GPUSpec, b: int, s: int, h: int, heads: int, vocab: int, tp: int, mode: str, sequence_parallel: bool,
    mfu: float,
) -> tuple[float, float, float, float]:
    """Everything a stage's cost needs per layer, in one memoised call (the plan-search hot path).

    :return: ``(seconds per layer and micro-batch, of which TP communication, LM head seconds per
        micro-batch, activation bytes per layer and micro-batch)``.
    """
    per_layer, comm = layer_costs(gpu, b, s, h, heads, tp, mode, sequence_parallel, mfu)
    return (per_layer, comm, lm_head_time(gpu, b, s, h, vocab, tp, mfu),
            activation_bytes(s, b, h, heads, tp, mode, sequence_parallel))
