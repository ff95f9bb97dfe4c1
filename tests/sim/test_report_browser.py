"""The report as a person sees it: `tandem simulate`'s index.html rendered in headless
Chromium at 1,400 px, for a one-seed run and a `--compare` run of a scenario with serving
load, a scale-up, a rolling update and a rack failure.

What the page must not show: a raw summary.json key as a table header (the keys are read
from the run's own summary.json), a `None` (or null/NaN), a page wider than the window.
What it must show: a marker for every event of the scenario file on every plot over time
(each marker is an SVG element with the id `event-N-P`), no across-seeds section for one
seed, and the headline figure compared across the runs when `--compare` ran.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest
import yaml

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
WIDTH = 1400
# The report's plots over time: each must mark every scenario event (the test's own list,
# so a plot that stops marking events, or a renamed one, fails here).
TIME_PLOTS = {
    "partial.svg",
    "functional.svg",
    "ratio.svg",
    "allocated.svg",
    "serving_latency.svg",
    "serving_replicas.svg",
    "serving_utilisation.svg",
    "serving_replica_load.svg",
}
ALWAYS_OVER_TIME = TIME_PLOTS - {"partial.svg"}  # partial.svg only when some run held such GPUs
# Appended to a copy of the page (beside it, so the plots load): what the browser laid out.
PROBE = """<script>
window.addEventListener("load", () => {
  const probe = {
    scrollWidth: document.scrollingElement.scrollWidth,
    innerWidth: window.innerWidth,
    headers: [...document.querySelectorAll("th")].map((th) => th.innerText.trim()),
    text: document.body.innerText,
    headings: [...document.querySelectorAll("h2, h3")].map((h) => h.innerText.trim()),
    images: [...document.images].map((img) => ({src: img.getAttribute("src"), width: img.naturalWidth})),
    headline: (document.querySelector("h2 + .headline") || {innerText: ""}).innerText,
  };
  const out = document.createElement("script");
  out.type = "application/json";
  out.id = "probe";
  out.textContent = JSON.stringify(probe);
  document.body.appendChild(out);
});
</script>"""


def _scenario(examples: Path) -> tuple[str, str]:
    """(scenario, group file): two groups of the 8B example, one scaled up, the other
    rolled to a new image, a rack failing and coming back, request load on the first."""
    group = yaml.safe_load((examples / "llama-8b.yaml").read_text())
    roles = copy.deepcopy(group["spec"]["roles"])
    for role in roles:
        for container in role["template"]["spec"]["containers"]:
            container["image"] = container["image"].replace("v0.11.0", "v0.11.1").replace(":1.0", ":1.1")
    scenario = {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "browser"},
        "spec": {
            "seed": 3,
            "durationSeconds": 600,
            "cluster": {"shape": "block=1,rack=2,host=4", "gpus": 8},
            "startup": {"*": {"imagePullSeconds": 5, "modelLoadMedianSeconds": 20, "modelLoadSigma": 0.1}},
            "groups": [{"at": 0, "file": "group.yaml"}, {"at": 60, "file": "group.yaml", "name": "llama-8b-b"}],
            "changes": [
                {"at": 200, "group": "serving/llama-8b", "patch": {"spec": {"replicas": 4}}},
                {"at": 300, "group": "serving/llama-8b-b", "patch": {"spec": {"roles": roles}}},
            ],
            "faults": [{"at": 400, "rack": "rack-1", "recoverAfterSeconds": 100}],
            "serving": [
                {
                    "group": "serving/llama-8b",
                    "model": "llama-3.1-8b",
                    "gpu": "h100-sxm",
                    "slo": {"ttftSeconds": 0.5, "itlSeconds": 0.03},
                    "synthetic": {"rate": 3},
                    "startAt": 60,
                }
            ],
        },
    }
    return yaml.safe_dump(scenario), yaml.safe_dump(group)


def _expected_events(scenario_text: str) -> int:
    """The events the scenario file schedules within its duration, counted from the file."""
    spec = yaml.safe_load(scenario_text)["spec"]
    end = spec["durationSeconds"]
    times = [g["at"] for g in spec.get("groups", [])] + [c["at"] for c in spec.get("changes", [])]
    for fault in spec.get("faults", []):
        times.append(fault["at"])
        if fault.get("recoverAfterSeconds") is not None:
            times.append(fault["at"] + fault["recoverAfterSeconds"])
    return sum(1 for at in times if at <= end)


@pytest.fixture(scope="module")
def reports(tmp_path_factory, run_cli, examples) -> dict[str, Path]:
    """The report of a one-seed run and of a `--compare` run of the same scenario."""
    folder = tmp_path_factory.mktemp("browser")
    scenario, group = _scenario(examples)
    (folder / "scenario.yaml").write_text(scenario)
    (folder / "group.yaml").write_text(group)
    out = {}
    for name, extra in (("one-seed", ()), ("compare", ("--compare",))):
        result = run_cli("simulate", folder / "scenario.yaml", *extra, "--seeds", "1", "--out", folder / name)
        assert result.exit_code == 0, result.stderr
        out[name] = folder / name
    return out


def _probe(report: Path, tmp_path: Path) -> dict:
    page = report / "index.html"
    probed = report / "probe.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WIDTH},1000", "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    found = re.search(r'<script type="application/json" id="probe">(.*?)</script>', dom, re.S)
    assert found, "the probe did not run: the page did not load"
    return json.loads(found.group(1))


def _keys(value) -> set[str]:
    """Every key anywhere in summary.json."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def _event_markers(svg: Path) -> dict[str, set[int]]:
    """Per panel of a plot, the numbers of the events it marks (ids `event-N-P`)."""
    panels: dict[str, set[int]] = {}
    for element in ElementTree.parse(svg).iter():
        found = re.fullmatch(r"event-(\d+)-(\d+)", element.get("id", ""))
        if found:
            panels.setdefault(found.group(2), set()).add(int(found.group(1)))
    return panels


@pytest.mark.parametrize("run", ["one-seed", "compare"])
def test_the_page_reads_without_a_glossary(run, reports, tmp_path):
    report = reports[run]
    probe = _probe(report, tmp_path)
    summary = json.loads((report / "summary.json").read_text())
    raw = {key for key in _keys(summary) if re.fullmatch(r"[a-z0-9_]+", key)}
    snake = {key for key in raw if "_" in key}
    assert probe["headers"], "the page has tables"
    for header in probe["headers"]:
        assert header not in raw, f"a raw summary key as a column header: {header!r}"
        assert not [key for key in snake if key in header], f"a raw key inside a header: {header!r}"
    for word in ("None", "null", "NaN"):
        assert not re.search(rf"\b{word}\b", probe["text"]), f"{word!r} on the page"
    assert probe["scrollWidth"] <= probe["innerWidth"] == WIDTH, f"the page is {probe['scrollWidth']} px wide at {WIDTH} px"
    assert "How to read this" in probe["headings"]
    assert all(image["width"] > 0 for image in probe["images"]), f"a plot did not load: {probe['images']}"
    _plots_are_drawn(report / "index.html", tmp_path)


def _plots_are_drawn(page: Path, tmp_path: Path) -> None:
    """A screenshot of the page at 1,400 px has the first group's colour (tab:blue, #1f77b4,
    its lines, bars and swatches) in many pixels: the plots are on the rendered page."""
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", f"--window-size={WIDTH},4000", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    assert image.size == (WIDTH, 4000)
    pixels = np.asarray(image, dtype=np.int32)
    blue = int((np.abs(pixels - np.array([31, 119, 180])) < 30).all(axis=2).sum())
    assert blue > 300, blue


@pytest.mark.parametrize("run", ["one-seed", "compare"])
def test_every_plot_over_time_marks_every_scenario_event(run, reports, tmp_path, examples):
    scenario, _ = _scenario(examples)
    events = _expected_events(scenario)
    assert events == 6
    shown = {image["src"] for image in _probe(reports[run], tmp_path)["images"]}
    assert ALWAYS_OVER_TIME <= shown, f"missing plots: {sorted(ALWAYS_OVER_TIME - shown)}"
    for name in sorted(shown & TIME_PLOTS):
        panels = _event_markers(reports[run] / name)
        assert panels, f"{name} marks no event"
        for panel, numbers in panels.items():
            assert numbers == set(range(1, events + 1)), f"{name}, panel {panel}: events {sorted(numbers)} of {events}"


def test_one_seed_shows_no_interval_section(reports, tmp_path):
    probe = _probe(reports["one-seed"], tmp_path)
    assert not [h for h in probe["headings"] if "seed" in h.lower()], probe["headings"]
    assert "serving_seeds.svg" not in {image["src"] for image in probe["images"]}
    assert "±" not in probe["text"]


def test_the_headline_is_compared_across_runs_or_said_in_words(reports, tmp_path):
    one = _probe(reports["one-seed"], tmp_path)
    assert "No comparison was run" in one["text"] and "--compare" in one["text"]
    summary = json.loads((reports["one-seed"] / "summary.json").read_text())
    if all(g["partial_gpu_seconds"] == 0 for g in summary["tandem"]["groups"].values()):
        assert "partial.svg" not in {image["src"] for image in one["images"]}, "no lonely flat-0 plot"
    compared = _probe(reports["compare"], tmp_path)
    runs = json.loads((reports["compare"] / "summary.json").read_text())
    assert set(runs) == {"tandem", "independent", "sequential"}
    for name in runs:
        assert name in compared["headline"], f"{name} missing from the headline: {compared['headline']!r}"
    if any(g["partial_gpu_seconds"] > 0 for figures in runs.values() for g in figures["groups"].values()):
        assert "partial.svg" in {image["src"] for image in compared["images"]}

