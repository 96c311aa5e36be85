"""A flat store's keys as models: a key prefix is a folder, one model if its files mark it.

A folder's keys are one run of the sorted keys; its files wait until the run ends or passes
every marker's name.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from modelhost.names import FOLDER_MARKERS, HF_CONFIG, is_model_file, is_model_folder, marks_folder

LAST_MARKER = max((*FOLDER_MARKERS, HF_CONFIG))


@dataclass
class _Folder:
    name: str  # with its trailing slash
    marks: set[str] = field(default_factory=set)
    waiting: list[str] = field(default_factory=list)
    plain: bool = False  # never a model


def page_of(keys: Iterable[str], after: str, limit: int) -> list[str]:
    """The first `limit` models after `after` that keys in name order make."""
    return list(itertools.islice((m for m in models_of(keys) if m > after), limit))


def models_of(keys: Iterable[str]) -> Iterator[str]:
    """The models of keys in name order, in name order, less hidden ones."""
    folders: list[_Folder] = []
    ready: list[str] = []  # a heap
    for key in keys:
        if any(part.startswith(".") for part in key.split("/")):
            continue
        while folders and not key.startswith(folders[-1].name):
            _close(folders, ready)
        parts = key.split("/")
        for depth in range(len(folders), len(parts) - 1):
            folders.append(_Folder("/".join(parts[: depth + 1]) + "/"))
        _mark(folders, key, ready)
        if is_model_file(parts[-1]):
            _found(folders, ready, key)
        while ready and _settled(ready[0], key):
            yield heapq.heappop(ready)
    while folders:
        _close(folders, ready)
    while ready:
        yield heapq.heappop(ready)


def _mark(folders: list[_Folder], key: str, ready: list[str]) -> None:
    """Note the markers `key` is for its folders."""
    for folder in folders:
        relative = key[len(folder.name) :]
        if marks_folder(relative):
            folder.marks.add(relative)
        past = relative > LAST_MARKER and HF_CONFIG not in folder.marks
        if past and not folder.plain and not is_model_folder(folder.marks):
            folder.plain = True
            for model in folder.waiting:
                _found(folders, ready, model)
            folder.waiting.clear()


def _found(folders: list[_Folder], ready: list[str], model: str) -> None:
    """Hold `model` in the nearest folder that may be a model, else make it ready."""
    holder = next((folder for folder in reversed(folders) if not folder.plain), None)
    if holder is None:
        heapq.heappush(ready, model)
    elif not is_model_folder(holder.marks):
        holder.waiting.append(model)


def _close(folders: list[_Folder], ready: list[str]) -> None:
    folder = folders.pop()
    if is_model_folder(folder.marks):
        _found(folders, ready, folder.name[:-1])
    else:
        for model in folder.waiting:
            _found(folders, ready, model)


def _settled(model: str, key: str) -> bool:
    """Whether no later key can make a model before `model` (folder `g` before `g-1.pkl`)."""
    return all(key >= model[:i] + "0" for i, char in enumerate(model) if char < "/")
