"""`tandem operator`'s own mistakes, and a command whose extra is missing: one `error:` line, exit 2
(an unusable kubeconfig: test_unusable_kubeconfig.py)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("command", "module", "extra"),
    [(("operator",), "lightkube", "operator"), (("apiserver", "--kubeconfig", "k"), "jsonschema", "apiserver"),
     (("certs", "--out", "c"), "cryptography", "operator"), (("topology-controller",), "lightkube", "operator")],
    ids=["operator", "apiserver", "certs", "topology-controller"],
)
def test_a_command_whose_extra_is_not_installed_says_which_to_install(run_cli, tmp_path, monkeypatch, command, module, extra):
    import sys

    for name in [m for m in sys.modules if m == module or m.startswith(module + ".") or m.startswith("tandem.kube")
                 or m.startswith("tandem.operator") or m.startswith("tandem.runtime") or m.startswith("tandem.topology_controller")
                 or m.startswith("tandem.apiserver")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # an import of it now fails as if it were not installed
    monkeypatch.chdir(tmp_path)
    result = run_cli(*command)
    assert result.exit_code == 2 and result.exception is None
    assert result.stderr.strip() == (f"error: tandem {command[0]} needs the {extra} extra (no module {module!r}): "
                                     f"pip install 'tandem[{extra}]'")


def test_a_provisioning_class_that_is_not_a_dns_subdomain_is_one_error_line_and_exit_2(run_cli, tmp_path):
    result = run_cli("operator", "--kubeconfig", tmp_path / "absent", "--provisioning-class", "Atomic_Scale_Up")
    assert result.exit_code == 2 and result.exception is None
    assert result.stderr.strip() == "error: --provisioning-class: 'Atomic_Scale_Up' is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')"


def test_an_unknown_backend_or_a_bad_queue_is_one_error_line_and_exit_2(run_cli, tmp_path):
    result = run_cli("operator", "--kubeconfig", tmp_path / "absent", "--backends", "volcano,slurm")
    assert result.exit_code == 2 and result.exception is None
    assert result.stderr.strip() == (
        "error: --backends: unknown backend 'slurm' (known: volcano, kai, koordinator, kueue, workload-api; 'native' needs no flag)"
    )
    result = run_cli("operator", "--kubeconfig", tmp_path / "absent", "--backends", "kueue", "--queue", "Team_A")
    assert result.exit_code == 2 and result.exception is None
    assert result.stderr.strip().startswith("error: --queue: 'Team_A' is not a DNS-1123 subdomain")


@pytest.mark.parametrize(
    ("args", "message"),
    [(("--metrics-source", "prometheus"), "error: --prometheus-url: --metrics-source prometheus needs the server's URL"),
     (("--metrics-source", "prometheus", "--prometheus-url", "ftp://metrics"), "error: --prometheus-url: 'ftp://metrics' is not http(s)://host[:port]"),
     (("--prometheus-url", "ftp://metrics"), "error: --prometheus-url: 'ftp://metrics' is not http(s)://host[:port]")],
    ids=["no-url", "not-http", "not-http-with-pods"],
)
def test_a_prometheus_source_without_a_usable_url_is_one_error_line_and_exit_2(run_cli, tmp_path, args, message):
    result = run_cli("operator", "--kubeconfig", tmp_path / "absent", *args)
    assert result.exit_code == 2 and result.exception is None
    assert result.stderr.strip() == message


def test_a_metrics_window_under_a_second_is_one_error_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "tandem.cli.main", "operator", "--kubeconfig", str(tmp_path / "absent"), "--metrics-window", "0.5"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("error: Invalid value for '--metrics-window': Input should be greater than or equal to 1")


def test_the_flags_are_the_defaults_groups_override():
    """--metrics-window reaches either source; --prometheus-url is also the server of groups that
    ask for Prometheus while the operator's default is another source."""
    from tandem.autoscaling.metrics_source import SourceDefaults
    from tandem.cli.main import MetricsSource, _metrics_source

    assert _metrics_source(MetricsSource.pods, None, 5.0) == SourceDefaults("pods", None, 5.0)
    assert _metrics_source(MetricsSource.prometheus, "http://127.0.0.1:9090", 7.0) == SourceDefaults("prometheus", "http://127.0.0.1:9090", 7.0)
    assert _metrics_source(MetricsSource.pods, "http://127.0.0.1:9090") == SourceDefaults("pods", "http://127.0.0.1:9090", 60.0)
    assert _metrics_source(MetricsSource.none, None) == SourceDefaults("none", None, 60.0)
