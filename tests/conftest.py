"""Shared test configuration.

Every test runs with one torch thread (small tensors: one thread is fastest and does not fight
other processes for the cores). Hypothesis runs derandomized by default (the same examples on
every run, so CI is reproducible); set ``HYPOTHESIS_PROFILE=explore`` to search with fresh
random examples.

Tests marked ``slow`` (each takes more than about 3 s on 2 cores) are left out unless
``--runslow`` is given: ``python -m pytest -q`` is the fast run, ``python -m pytest -q
--runslow`` the full run (.ci/run's); docs/testing.md gives their times.

Exact comparisons (``rtol=0, atol=0``, ``assert_array_equal``, ``torch.equal``) compare two
runs of the same computation in one process: bit for bit holds there, on one machine, with the
same CPU features and library versions. Float32 results compared with stored values, or
between computations that reach the libraries' kernels differently (another memory layout,
another CPU), use tolerances from the float32 arithmetic (``_helpers.float32_logit_bound``);
.ci/run runs the suite a second time under other kernels (issue 27).
"""

import os

import pytest
import torch
from hypothesis import settings

settings.register_profile("default-ci", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default-ci"))


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def pytest_addoption(parser):
    parser.addoption(
        "--runslow", action="store_true", help="also run the tests marked slow (the full run)"
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
