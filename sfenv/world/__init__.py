"""The world layer: hardware, topologies and their generators, electricity and egress prices, workloads, the CSV reader.

Layer ``world`` (see docs/architecture.md): the lowest layer; it imports only :mod:`sfenv.errors`
and :mod:`sfenv.hashing`.
"""
