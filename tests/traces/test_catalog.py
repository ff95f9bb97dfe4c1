"""The catalogue of public traces: every entry is pinned, parseable and attributed."""

from __future__ import annotations

import re

import pytest

from tandem.errors import InputError
from tandem.sim.traces import CATALOG, FORMATS, lookup

REQUIRED = {"azure-conv-2023", "azure-code-2023", "mooncake-conversation", "mooncake-synthetic", "burstgpt"}


def test_the_required_traces_are_catalogued():
    assert REQUIRED <= set(CATALOG)
    assert all(name == entry.name for name, entry in CATALOG.items())


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_each_entry_is_pinned_and_attributed(name):
    entry = CATALOG[name]
    assert entry.format in FORMATS
    assert entry.url.startswith("https://")
    assert entry.url.endswith("/" + entry.file_name)
    # A branch name would let the bytes change under the digest: a commit or a release tag.
    assert re.search(r"/[0-9a-f]{12,40}/|/releases/download/v[0-9.]+/", entry.url), entry.url
    assert entry.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", entry.sha256)
    assert entry.licence and entry.citation
    assert "/" not in entry.file_name and not entry.file_name.startswith(".")


def test_only_burstgpt_lacks_a_digest():
    assert {name for name, entry in CATALOG.items() if entry.sha256 is None} == {"burstgpt"}


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(InputError) as excinfo:
        lookup("sharegpt")
    assert str(excinfo.value) == f"NAME: no trace called 'sharegpt'; known: {', '.join(sorted(CATALOG))}"
