"""Shared test configuration.

Hypothesis runs derandomized by default (the same examples on every run, so CI is
reproducible); set ``HYPOTHESIS_PROFILE=explore`` to search with fresh random examples.
"""

import os

from hypothesis import settings

settings.register_profile("default-ci", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default-ci"))
