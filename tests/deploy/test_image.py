"""The operator's image: slim, its base pinned by digest, its dependencies locked with hashes,
non-root, only the operator's extra installed, and a build context of only what it copies."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from support.deploy import REPO

LOCK = REPO / "requirements" / "operator.txt"


def _dockerfile() -> str:
    return (REPO / "Dockerfile").read_text()


def test_the_base_image_is_pinned_by_digest():
    bases = re.findall(r"^FROM (\S+)", _dockerfile(), re.M)
    assert len(bases) == 2, "a build stage and the image"
    for base in bases:
        match = re.fullmatch(r"python:3\.11\.\d+-slim-\w+@sha256:([0-9a-f]{64})", base)
        assert match, f"{base}: a tag names the Python, a digest pins its bytes"
        assert set(match[1]) != {"0"}, "a real digest, not a placeholder"
    assert len(set(bases)) == 1, "both stages on the same base"


def test_dependencies_come_from_the_lock_with_hashes_and_tandem_without_dependencies():
    text = _dockerfile()
    installs = re.findall(r"pip install ([^\n&]*)", text)
    assert len(installs) == 2, installs
    locked, own = installs
    assert "--require-hashes" in locked and "-r requirements/operator.txt" in locked and "--only-binary=:all:" in locked
    assert "--no-deps" in own and "--no-build-isolation" in own and own.rstrip().endswith(" ."), "tandem itself adds nothing unlocked"
    assert "--upgrade pip" not in text, "no unhashed install of pip either"


def _lock() -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of every requirement in the lock."""
    out: dict[str, tuple[str, int]] = {}
    for block in re.split(r"\n(?=\S)", LOCK.read_text()):
        first = block.splitlines()[0]
        if first.startswith("#") or not first.strip():
            continue
        name, version = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+) \\", first.strip()).groups()  # type: ignore[union-attr]
        out[name.lower().replace("_", "-")] = (version, block.count("--hash=sha256:"))
    return out


def test_the_lock_has_a_hash_for_every_requirement_and_agrees_with_pyproject():
    lock = _lock()
    assert lock and all(hashes >= 1 for _, hashes in lock.values()), "every requirement carries its hashes"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    pins = [*project["project"]["dependencies"], *project["project"]["optional-dependencies"]["operator"], *project["build-system"]["requires"]]
    for pin in pins:
        name, version = pin.split("==")
        assert lock.get(name.lower().replace("_", "-"), ("missing",))[0] == version, f"{pin}: regenerate requirements/operator.txt (its header says how)"
    others = {p.split("==")[0].lower() for extra in ("plot", "exact", "dev", "calibrate") for p in project["project"]["optional-dependencies"][extra]}
    others -= {p.split("==")[0].lower() for p in pins}  # dev repeats some of the operator's
    assert not others & set(lock), "plotting, the solver and test tools stay out of the image"


def test_the_image_runs_as_non_root():
    user = re.findall(r"^USER (\S+)", _dockerfile(), re.M)
    assert user and user[-1].split(":")[0].isdigit() and user[-1].split(":")[0] != "0"


def test_the_build_context_holds_only_what_the_dockerfile_copies():
    """`.dockerignore` excludes everything, then lets in exactly the COPY sources: no `certs/`
    (private keys from `tandem certs`), kubeconfigs, .git or virtual environments."""
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0] == "*", "deny by default"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = {source.rstrip("/") for args in re.findall(r"^COPY (?!--from)(.+)$", _dockerfile(), re.M) for source in args.split()[:-1]}
    assert allowed == copied, (allowed, copied)


def test_the_operator_runs_without_the_plotting_extra():
    code = "import sys; sys.modules['matplotlib'] = None; import tandem.cli.main, tandem.operator.process; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
