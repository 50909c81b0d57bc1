"""The world layer: hardware, topologies and their generators, prices, workloads, and the CSV reader they share.

Layer ``world`` (see docs/architecture.md): the lowest layer; it imports only :mod:`sfenv.errors`
and :mod:`sfenv.hashing`.
"""
