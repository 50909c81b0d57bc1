"""sfenv: a Gymnasium testbed for scheduling LLM training across geo-distributed GPU clusters.

Importing ``sfenv`` registers the environment ids (``sfenv/GeoSched-v1`` and one per bundled
scenario) and imports neither torch, Stable-Baselines3 nor matplotlib.
"""

from sfenv import _moved
from sfenv.registration import register_envs

__version__ = "0.1.0"
__all__ = ["__version__", "register_envs"]

_moved.install()  # old module paths (sfenv.perf, sfenv.sim's neighbours, ...) warn and still import
register_envs()
