"""The Gymnasium layer: :class:`GeoSchedEnv`, its observation encoders, candidate proposers and rendering.

Layer ``env`` (see docs/architecture.md): imports ``sim`` and the layers below it, never ``runs``,
agents or ``app``.  ``sfenv.env:GeoSchedEnv`` is the registered entry point.
"""

from sfenv.env.geosched import GeoSchedEnv
from sfenv.env.observation import (
    CAND_FEATURES,
    COMPACT_CAND_FEATURES,
    GLOBAL_FEATURES,
    JOB_FEATURES,
    LINK_FEATURES,
    OBS_MODES,
    PLATFORM_FEATURES,
    PRIVILEGED_GLOBAL_FEATURES,
    REGION_FEATURES,
)

__all__ = [
    "CAND_FEATURES",
    "COMPACT_CAND_FEATURES",
    "GLOBAL_FEATURES",
    "JOB_FEATURES",
    "LINK_FEATURES",
    "OBS_MODES",
    "PLATFORM_FEATURES",
    "PRIVILEGED_GLOBAL_FEATURES",
    "REGION_FEATURES",
    "GeoSchedEnv",
]
