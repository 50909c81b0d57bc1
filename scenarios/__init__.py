"""Bundled scenario files (``*.yaml``), shipped as package data; load them with ``sfenv.scenario.load_scenario``."""
