"""`tandem trace fetch | list | info` end to end, without the network.

The catalogue entry under test is pointed at a `file://` URL of a temporary file by
monkeypatching the catalogue itself, so the command line gains no test-only option.
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from dataclasses import replace

import pytest

from tandem.sim.traces import catalog

PAYLOAD = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
    "2023-11-16 18:15:46.6805900,374,44\r\n"
    "2023-11-16 18:15:50.9951690,396,109\r\n"
    "2023-11-16 18:16:46.6805900,1200,7"
).encode()


@pytest.fixture
def upstream(tmp_path, monkeypatch):
    """A fake upstream file, and the azure-conv-2023 entry pointed at it with its digest."""
    source = tmp_path / "upstream" / "AzureLLMInferenceTrace_conv.csv"
    source.parent.mkdir()
    source.write_bytes(PAYLOAD)
    entry = replace(catalog.CATALOG["azure-conv-2023"], url=source.as_uri(), sha256=hashlib.sha256(PAYLOAD).hexdigest(), size_bytes=len(PAYLOAD))
    monkeypatch.setitem(catalog.CATALOG, entry.name, entry)
    return source, entry


@pytest.fixture
def no_network(monkeypatch):
    """Fail the test if anything is downloaded."""

    def refuse(*args, **kwargs):
        raise AssertionError("nothing should be downloaded here")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


def _one_error_line(result) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert result.exception is None
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


# -- fetch -------------------------------------------------------------------------------


def test_fetch_writes_the_file_and_prints_its_path(run_cli, upstream, tmp_path):
    _, entry = upstream
    target_dir = tmp_path / "traces"
    result = run_cli("trace", "fetch", entry.name, "--dir", target_dir)
    assert result.exit_code == 0, result.stderr
    target = target_dir / entry.file_name
    assert target.read_bytes() == PAYLOAD
    assert result.stdout.strip() == str(target)
    assert "sha256 verified" in result.stderr and f"{len(PAYLOAD):,} bytes" in result.stderr
    assert sorted(p.name for p in target_dir.iterdir()) == [entry.file_name]  # no temporary file left


def test_a_second_fetch_is_a_no_op(run_cli, upstream, tmp_path, monkeypatch):
    source, entry = upstream
    target_dir = tmp_path / "traces"
    assert run_cli("trace", "fetch", entry.name, "--dir", target_dir).exit_code == 0
    target = target_dir / entry.file_name
    os.utime(target, (1_000_000, 1_000_000))

    def refuse(*args, **kwargs):
        raise AssertionError("an intact file must not be downloaded again")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    result = run_cli("trace", "fetch", entry.name, "--dir", target_dir)
    assert result.exit_code == 0, result.stderr
    assert "already there, sha256 verified" in result.stderr
    assert result.stdout.strip() == str(target)
    assert target.stat().st_mtime == 1_000_000


def test_a_digest_mismatch_exits_2_with_one_line_and_leaves_nothing_behind(run_cli, upstream, tmp_path, monkeypatch):
    _, entry = upstream
    wrong = "0" * 64
    monkeypatch.setitem(catalog.CATALOG, entry.name, replace(entry, sha256=wrong))
    target_dir = tmp_path / "traces"
    result = run_cli("trace", "fetch", entry.name, "--dir", target_dir)
    line = _one_error_line(result)
    assert line == f"error: {entry.name}: sha256 mismatch: expected {wrong}, got {hashlib.sha256(PAYLOAD).hexdigest()}"
    assert list(target_dir.iterdir()) == []
    assert result.stdout == ""


def test_a_corrupted_local_copy_is_replaced(run_cli, upstream, tmp_path):
    _, entry = upstream
    target_dir = tmp_path / "traces"
    target_dir.mkdir()
    (target_dir / entry.file_name).write_bytes(PAYLOAD[:40])
    result = run_cli("trace", "fetch", entry.name, "--dir", target_dir)
    assert result.exit_code == 0, result.stderr
    assert "has another sha256; downloading it again" in result.stderr
    assert (target_dir / entry.file_name).read_bytes() == PAYLOAD


def test_a_failed_download_is_one_line_and_leaves_nothing_behind(run_cli, upstream, tmp_path):
    source, entry = upstream
    source.unlink()
    target_dir = tmp_path / "traces"
    line = _one_error_line(run_cli("trace", "fetch", entry.name, "--dir", target_dir))
    assert line.startswith(f"error: {entry.name}: cannot download {entry.url}: ")
    assert list(target_dir.iterdir()) == []


def test_the_default_directory_comes_from_tandem_traces(run_cli, upstream, tmp_path, monkeypatch):
    _, entry = upstream
    monkeypatch.setenv("TANDEM_TRACES", str(tmp_path / "from-env"))
    result = run_cli("trace", "fetch", entry.name)
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "from-env" / entry.file_name).read_bytes() == PAYLOAD


def test_burstgpt_has_no_digest_so_fetch_refuses_without_sha256_or_no_verify(run_cli, tmp_path, no_network):
    line = _one_error_line(run_cli("trace", "fetch", "burstgpt", "--dir", tmp_path / "traces"))
    assert line.startswith("error: burstgpt: no sha256 is recorded for this trace")
    assert "--sha256 HEX" in line and "--no-verify" in line
    assert not (tmp_path / "traces").exists()


def test_an_entry_without_digest_is_checked_against_sha256_or_taken_with_no_verify(run_cli, upstream, tmp_path, monkeypatch):
    _, entry = upstream
    monkeypatch.setitem(catalog.CATALOG, entry.name, replace(entry, sha256=None))
    digest = hashlib.sha256(PAYLOAD).hexdigest()

    checked = run_cli("trace", "fetch", entry.name, "--dir", tmp_path / "a", "--sha256", digest.upper())
    assert checked.exit_code == 0, checked.stderr
    assert "sha256 verified" in checked.stderr

    unchecked = run_cli("trace", "fetch", entry.name, "--dir", tmp_path / "b", "--no-verify")
    assert unchecked.exit_code == 0, unchecked.stderr
    assert f"not verified, sha256 {digest}" in unchecked.stderr
    assert (tmp_path / "b" / entry.file_name).read_bytes() == PAYLOAD

    wrong = run_cli("trace", "fetch", entry.name, "--dir", tmp_path / "c", "--sha256", "ab" * 32)
    assert "sha256 mismatch" in _one_error_line(wrong)
    assert list((tmp_path / "c").iterdir()) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--sha256", "xyz"), "error: --sha256: must be 64 hexadecimal digits, got 'xyz'"),
        (("--sha256", "a" * 64, "--no-verify"), "error: --sha256: contradicts --no-verify; give one of them"),
    ],
)
def test_bad_fetch_options_are_one_line(run_cli, tmp_path, no_network, args, expected):
    assert _one_error_line(run_cli("trace", "fetch", "azure-conv-2023", "--dir", tmp_path, *args)) == expected


def test_an_unknown_trace_name_is_one_line(run_cli, tmp_path, no_network):
    line = _one_error_line(run_cli("trace", "fetch", "sharegpt", "--dir", tmp_path))
    assert line.startswith("error: NAME: no trace called 'sharegpt'; known: azure-code-2023, azure-conv-2023")


# -- list and info -----------------------------------------------------------------------


def test_list_shows_every_catalogued_trace(run_cli):
    result = run_cli("trace", "list")
    assert result.exit_code == 0, result.stderr
    for entry in catalog.CATALOG.values():
        assert entry.name in result.stdout
    assert "not recorded" in result.stdout  # burstgpt's digest
    assert "CC-BY-4.0" in result.stdout and "Apache-2.0" in result.stdout


def test_info_summarizes_a_local_trace(run_cli, tmp_path):
    path = tmp_path / "conv.csv"
    path.write_bytes(PAYLOAD)
    result = run_cli("trace", "info", path)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["trace", "conv"]
    assert lines[1].split() == ["requests", "3"]
    assert "60.0 s" in lines[2]
    assert "p50 396" in lines[4] and "max 1,200" in lines[4]


def test_info_reports_burstgpt_failures(run_cli, tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,ChatGPT,5,0,5,API log\n3,GPT-4,7,9,16,API log\n")
    result = run_cli("trace", "info", path, "--format", "burstgpt")
    assert result.exit_code == 0, result.stderr
    assert "1 failed requests (0 response tokens)" in result.stdout


def test_info_on_a_bad_file_is_one_line_naming_file_line_and_column(run_cli, tmp_path):
    path = tmp_path / "conv.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n2023-11-16 18:15:47,abc,1\n")
    line = _one_error_line(run_cli("trace", "info", path))
    assert line == f"error: {path}: line 3: ContextTokens: 'abc' is not an integer"


def test_info_with_the_wrong_format_or_a_missing_file_is_one_line(run_cli, tmp_path):
    path = tmp_path / "conv.csv"
    path.write_bytes(PAYLOAD)
    assert "header lacks column(s) Timestamp, Request tokens, Response tokens" in _one_error_line(run_cli("trace", "info", path, "--format", "burstgpt"))
    assert _one_error_line(run_cli("trace", "info", tmp_path / "missing.csv")) == f"error: {tmp_path / 'missing.csv'}: cannot read: No such file or directory"
    result = run_cli("trace", "info", path, "--format", "sharegpt")
    assert result.exit_code == 2 and result.exception is None
