"""The word lists (`mnemo.lexicon`): read from disk once, then kept."""

from __future__ import annotations

import pytest

from mnemo import lexicon


@pytest.mark.parametrize("reader", ["aspects", "ending_objects", "slot_table", "multi_slots", "slot_families",
                                    "pronoun_of", "kin"])
def test_each_word_list_is_read_from_disk_once(reader, monkeypatch):
    """The word lists are read on the write and recall paths for every word: each is read once, then kept."""
    getattr(lexicon, reader)()
    monkeypatch.setattr(lexicon, "_lines", lambda name: (_ for _ in ()).throw(AssertionError(f"{name} read again")))
    getattr(lexicon, reader)()
