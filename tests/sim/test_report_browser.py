"""The report as a person sees it: index.html rendered in headless Chromium."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from support.builders import cluster, group, role
from tandem.sim.report import write_report
from tandem.sim.runner import Scenario, simulate
from tandem.sim.summary import summarize

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium found: `.ci/run` installs Debian's chromium; elsewhere install it to run this test"
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def _report(out):
    g = group("llama", [role("prefill", 2, 1, gpus=8), role("decode", 1, 1, gpus=8, pods=2)], replicas=2, required="rack")
    scenario = Scenario(cluster=cluster("block=1,rack=2,host=4"), arrivals=[(0.0, g)], duration_s=400.0, seed=2)
    result = simulate(scenario)
    write_report(out, {"tandem": (result, summarize(scenario, result))}, "browser test")
    return out / "index.html"


def test_the_report_renders_with_its_plots(tmp_path):
    page = _report(tmp_path / "out")
    shot = tmp_path / "shot.png"
    profile = tmp_path / "profile"
    subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1400,2200", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 2200)
    # matplotlib's first colour (tab:blue, #1f77b4) draws the plotted lines: if the plots
    # are on the rendered page, many pixels near it are there.
    pixels = np.asarray(image, dtype=np.int32)
    blue = int((np.abs(pixels - np.array([31, 119, 180])) < 30).all(axis=2).sum())
    assert blue > 300, blue
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    for image_name in ("functional.png", "ratio.png", "partial.png", "topology.png"):
        assert f'src="{image_name}"' in dom
    assert "partial_gpu_seconds" in dom
