"""Fixtures for the backend tests: the repository's examples and a small cluster, loaded once."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.builders import cluster
from tandem.api.loading import Inputs
from tandem.cli.files import load_files

from backends.variants import load


@pytest.fixture(scope="session")
def example_inputs(examples: Path) -> Inputs:
    """The example cluster (64 nodes, block/rack/host) and every example group."""
    groups = sorted(p for p in examples.glob("*.yaml") if p.name != "cluster.yaml")
    return load_files([examples / "cluster.yaml", *groups])


@pytest.fixture(scope="session")
def small_cluster() -> Inputs:
    """2 blocks x 2 racks x 2 hosts, levels block, rack, host."""
    return load(cluster("block=2,rack=2,host=2", gpus=8))
