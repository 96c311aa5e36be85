"""The README stays an opening page: its two commands are the Makefile's and CI runs the test one,
it stays short, its links and the docs' lead to files that exist, and the docs' modelhost
commands take the options they are shown with."""

from __future__ import annotations

import re
from pathlib import Path

import click

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 100  # a page a newcomer reads in a few minutes; the reference is in docs/
COMMANDS = re.compile(r"^## Two commands\n.*?^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)
TARGET = re.compile(r"^([\w-]+):", re.MULTILINE)
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")


def commands(readme: str) -> list[str]:
    """The commands of the README's "Two commands" block, without their comments."""
    match = COMMANDS.search(readme)
    assert match, "README.md has no '## Two commands' section with a sh block"
    lines = (line.partition("#")[0].strip() for line in match.group(1).splitlines())
    return [line for line in lines if line]


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def broken_links(page: Path) -> list[str]:
    """Relative links of a markdown page whose file, or heading, does not exist."""
    broken = []
    for target, part in LINK.findall(page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        linked = page.parent / target if target else page
        if not linked.exists():
            broken.append(target)
        elif part and linked.suffix == ".md" and part not in map(anchor, headings(linked)):
            broken.append(f"{target}#{part}")
    return broken


def test_the_two_commands_are_make_serve_and_make_test() -> None:
    assert commands(README.read_text()) == ["make serve", "make test"]


def test_each_readme_command_is_a_makefile_target() -> None:
    targets = set(TARGET.findall((ROOT / "Makefile").read_text()))
    assert {command.split()[1] for command in commands(README.read_text())} <= targets


def test_ci_runs_the_readme_test_command() -> None:
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "make test" in ci


def test_the_readme_stays_short() -> None:
    assert len(README.read_text().splitlines()) <= MAX_README_LINES


def test_links_lead_to_files_that_exist() -> None:
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    assert {page.name: broken_links(page) for page in pages if broken_links(page)} == {}


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("")
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# There\n\n## A part: its (own) name\n")
    page.write_text(
        "[a](there.md#a-part-its-own-name), [b](gone.md), [c](https://example.com/x.md), "
        "[d](there.md#gone-part)"
    )
    assert broken_links(page) == ["gone.md", "there.md#gone-part"]


ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def issue_mentions(pages: list[Path]) -> list[str]:
    """Lines that name an issue number, which a reader of the repository cannot look up."""
    return [
        f"{page.name}:{number}"
        for page in pages
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if ISSUE.search(line)
    ]


def test_no_page_names_an_issue_number() -> None:
    assert issue_mentions([README, *sorted((ROOT / "docs").rglob("*.md"))]) == []


def test_an_issue_mention_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("kept since issue 16\nan issue with it\nsee Issue #3\n")
    assert issue_mentions([page]) == ["page.md:1", "page.md:3"]


# A page of docs/ named with a quoted heading in code and docs: the quote starts a heading there.
SECTION_REF = re.compile(r"\b([\w-]+\.md),? \"([^\"\n]+)")
SOURCES = ("modelhost", "tests", "benchmarks", "scripts", "docs")


def headings(page: Path) -> list[str]:
    return [
        line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("#")
    ]


def stale_section_refs(files: list[Path], docs: Path) -> list[str]:
    """References to a section of a page in docs/ that no heading of the page starts with."""
    stale = []
    for path in files:
        for page, quoted in SECTION_REF.findall(path.read_text(errors="replace")):
            start = quoted.rstrip(".… ").strip()
            if (docs / page).exists() and not any(
                h.startswith(start) for h in headings(docs / page)
            ):
                stale.append(f"{path.name}: {page}, {quoted}")
    return stale


def test_section_references_name_a_heading() -> None:
    files = [
        path
        for folder in SOURCES
        for path in (ROOT / folder).rglob("*")
        if path.suffix in {".py", ".md", ".proto"}
    ]
    assert stale_section_refs([README, *files], ROOT / "docs") == []


def test_a_stale_section_reference_is_found(tmp_path: Path) -> None:
    (tmp_path / "decisions.md").write_text("# Decisions\n\n### Frames: a header\n")
    page = "decisions" + ".md"  # split, so that this file's own text is not read as a reference
    code = tmp_path / "code.py"
    code.write_text(f'# see {page}, "Frames: a ..." and {page}, "Gone section"\n')
    assert stale_section_refs([code], tmp_path) == ["code.py: decisions.md, Gone section"]


# A `modelhost ...` command in a code span or block, up to the end of its line or a pipe.
COMMAND = re.compile(r"(?:^|[\s(])modelhost ((?:[a-z-]+ ?)+)([^\n|]*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def unknown_options(page: Path) -> list[str]:
    """Options of the `modelhost` commands a page shows that the command does not have."""
    from modelhost.cli.main import main

    text = page.read_text()
    spans = re.findall(r"```\w*\n(.*?)```", text, re.DOTALL) + re.findall(r"`([^`\n]+)`", text)
    unknown = []
    for words, rest in (found.groups() for span in spans for found in COMMAND.finditer(span)):
        command: click.Command | None = main
        path = words.split()
        while isinstance(command, click.Group) and path:
            command = command.get_command(click.Context(command), path.pop(0))
        if command is None or isinstance(command, click.Group):
            continue
        known = {"--help", *(o for p in command.params for o in p.opts + p.secondary_opts)}
        given = OPTION.findall(" ".join(path) + " " + rest)
        unknown += [f"{page.name}: {command.name} {o}" for o in given if o not in known]
    return unknown


def test_the_docs_give_modelhost_commands_only_options_they_have() -> None:
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    assert [u for page in pages for u in unknown_options(page)] == []


def test_an_unknown_option_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "`modelhost serve --workers 2 --no-such-flag`\n```sh\nmodelhost bench --nope\n```"
    )
    assert unknown_options(page) == ["page.md: bench --nope", "page.md: serve --no-such-flag"]
