"""The journal of registrations: order kept, versions forgotten one at a time, and a file that a
crash or a hand edit cannot turn into a server that will not start."""

from __future__ import annotations

from pathlib import Path

from modelhost.host.journal import Entry, Journal


def test_entries_survive_in_order_and_forget_one_version(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "registered.json")
    journal.record("a", "1.0", {"url": "a.mar"})
    journal.record("a", "2.0", {"url": "a2.mar"})
    journal.record("b", "1.0", {"url": "b.mar"})
    journal.forget("a", "1.0")
    assert Journal(journal.path).entries == [
        Entry("a", "2.0", {"url": "a2.mar"}),
        Entry("b", "1.0", {"url": "b.mar"}),
    ]


def test_a_failed_replay_is_kept_for_the_next_start(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "registered.json")
    journal.record("a", "1.0", {"url": "a.mar"})
    (entry,) = journal.take()
    journal.keep(entry)
    assert Journal(journal.path).entries == [entry]


def test_an_unreadable_file_restores_nothing(tmp_path: Path) -> None:
    (tmp_path / "registered.json").write_text("[{'not json")
    assert Journal(tmp_path / "registered.json").entries == []
