"""An interrupted `tandem simulate` leaves no half-written file: each is written beside
its name and renamed, and index.html comes last."""

from __future__ import annotations

import pytest

import tandem.sim.report as report


def test_an_interrupt_while_writing_leaves_the_old_file_whole(tmp_path, monkeypatch):
    target = tmp_path / "summary.json"
    target.write_text("old, whole\n")
    real = report.Path.write_text

    def interrupted(self, text, encoding=None):
        real(self, text[: len(text) // 2], encoding=encoding)
        raise KeyboardInterrupt

    monkeypatch.setattr(report.Path, "write_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report._write_text(target, '{"new": "figures"}\n')
    assert target.read_text() == "old, whole\n"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"], "no partial file left behind"
