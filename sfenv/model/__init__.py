"""The performance model: compute, pipeline schedules (and their compiled twins), plan evaluation and plan search.

Layer ``model`` (see docs/architecture.md): pure functions over ``world`` objects; it imports
``world``, :mod:`sfenv.errors` and :mod:`sfenv.hashing`, never the simulator.
"""
