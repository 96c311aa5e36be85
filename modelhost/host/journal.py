"""The registrations `--restore-registered` keeps: each model version registered through a
management API, with the parameters it was registered with, in a file of the cache folder."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

logger = logging.getLogger("modelhost")

JOURNAL_FILE = "registered.json"


class Entry(NamedTuple):
    model: str
    version: str
    params: dict[str, str]  # the registration's, as the API was given them


class Journal:
    """Entries in the order they were registered, rewritten whole on each change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries = read_entries(path)

    def record(self, model: str, version: str, params: Mapping[str, str]) -> None:
        self.entries.append(Entry(model, version, dict(params)))
        self.save()

    def forget(self, model: str, version: str) -> None:
        self.entries = [e for e in self.entries if (e.model, e.version) != (model, version)]
        self.save()

    def take(self) -> list[Entry]:
        """The entries to replay; each is recorded again as its registration succeeds."""
        taken, self.entries = self.entries, []
        return taken

    def keep(self, entry: Entry) -> None:
        """An entry whose replay failed: kept for the next start, when its store may answer."""
        self.entries.append(entry)
        self.save()

    def save(self) -> None:
        """Written aside and renamed over, so a crash leaves the old file or the new one."""
        part = self.path.with_suffix(".part")
        part.write_text(json.dumps([e._asdict() for e in self.entries], indent=1))
        os.replace(part, self.path)


def read_entries(path: Path) -> list[Entry]:
    """The file's entries; none if it is missing or unreadable (then logged)."""
    try:
        return [Entry(**row) for row in json.loads(path.read_text(encoding="utf-8"))]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError) as error:
        logger.error("cannot read the registered models in %s: %s; none restored", path, error)
        return []
