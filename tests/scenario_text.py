"""Scenario files as text, for the tests that write them (bad input, contained paths)."""

from __future__ import annotations


def two_regions(name: str) -> str:
    """The ``name`` and ``topology`` of a scenario file: two regions of 64 A100 in zones Z1 and Z2, one link."""
    return f"""\
name: {name}
topology:
  regions:
    - {{name: a, gpu: A100-80GB, gpus: 64, zone: Z1}}
    - {{name: b, gpu: A100-80GB, gpus: 64, zone: Z2}}
  links:
    - {{a: a, b: b, bandwidth_gbps: 10, latency_ms: 20}}
"""
