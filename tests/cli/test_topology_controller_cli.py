"""`tandem topology-controller`'s flags: a mistake is one `error:` line naming the flag,
exit 2, before anything connects; `--backends` takes a comma list or the flag repeated
(a kustomize component adds one `--backends` per backend)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st


def one_error(result) -> str:
    assert result.exit_code == 2 and result.exception is None, (result.exit_code, result.exception, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize(
    ("backends", "says"),
    [
        (["volcano,slurm"], "error: --backends: unknown backend 'slurm' (known: kai, koordinator, kueue, volcano)"),
    ],
    ids=["unknown"],
)
def test_bad_backends_are_one_error_line_and_exit_2(run_cli, tmp_path, backends, says):
    line = one_error(run_cli("topology-controller", "--kubeconfig", tmp_path / "absent", "--backends", *backends))
    assert line.startswith(says), line


@pytest.mark.parametrize("backends", [["volcano,kai,koordinator"], ["volcano", "--backends", "kai", "--backends", "koordinator"], ["kueue"],
                                      ["kai,kueue"], ["volcano,kai", "--backends", "kueue"], []],
                         ids=["comma-list", "repeated", "kueue", "kai-and-kueue", "kai-and-kueue-repeated", "none"])
def test_good_backends_get_as_far_as_connecting(run_cli, tmp_path, backends):
    args = ["--backends", *backends] if backends else []
    line = one_error(run_cli("topology-controller", "--kubeconfig", tmp_path / "absent", *args, "--health-port", "0", "--metrics-port", "0"))
    assert line.startswith("error: --kubeconfig: cannot connect: "), line


def test_a_lease_name_that_is_not_a_dns_subdomain_is_refused(run_cli, tmp_path):
    line = one_error(run_cli("topology-controller", "--kubeconfig", tmp_path / "absent", "--lease-name", "Not_A_Name"))
    assert line.startswith("error: --lease-name: "), line


NAMES = ["volcano", "kai", "koordinator", "kueue"]


@given(
    chosen=st.lists(st.sampled_from(NAMES), min_size=1, max_size=8),
    cuts=st.lists(st.booleans(), min_size=8, max_size=8),
    spaces=st.booleans(),
)
def test_any_split_into_comma_lists_and_repeated_flags_means_the_same_backends(chosen, cuts, spaces):
    """However the names are spread over `--backends` values (one comma list, one flag each,
    repeats, spaces after commas), the settings are the set of names, sorted."""
    from tandem.cli.main import _topology_settings

    values, current = [], []
    for name, cut in zip(chosen, cuts):
        current.append(name)
        if cut:
            values.append((", " if spaces else ",").join(current))
            current = []
    if current:
        values.append(",".join(current))
    assert _topology_settings(values).backends == tuple(sorted(set(chosen)))
