"""Shared fixtures. Tests never touch the network."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

# Test models are tiny: one thread is fastest, and robust when the machine is shared
# (several processes each spinning 2 OpenMP threads on 2 cores were measured 25x slower).
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
