"""The files of a maintained project: LICENSE, CHANGELOG.md, docs/perf.md and what README says.

They are product like the code: each test here holds one of them to what it promises, so it
cannot drift from pyproject.toml, the package version or bench/ unnoticed.
"""

from __future__ import annotations

import re
import tomllib

import trialrun
from paths import REPO_ROOT

ROOT = REPO_ROOT

KEEP_A_CHANGELOG_TYPES = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$")


def read(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


def test_license_is_the_licence_pyproject_declares() -> None:
    project = tomllib.loads(read("pyproject.toml"))["project"]
    licence = read("LICENSE")
    assert project["license"] == "MIT"
    assert licence.startswith("MIT License\n")
    assert re.search(r"^Copyright \(c\) \d{4} \S", licence, re.MULTILINE)
    assert "WITHOUT WARRANTY OF ANY KIND" in licence


def changelog_sections() -> list[tuple[str, list[str]]]:
    """Each ``## `` heading of CHANGELOG.md with the lines under it, in file order."""
    sections: list[tuple[str, list[str]]] = []
    for line in read("CHANGELOG.md").splitlines():
        if line.startswith("## "):
            sections.append((line, []))
        elif sections:
            sections[-1][1].append(line)
    return sections


def test_changelog_opens_with_unreleased_then_dated_releases_newest_first() -> None:
    assert read("CHANGELOG.md").startswith("# Changelog\n")
    headings = [heading for heading, _ in changelog_sections()]
    assert headings[0] == "## [Unreleased]"
    releases = [RELEASE.match(heading) for heading in headings[1:]]
    assert all(releases), f"expected '## [X.Y.Z] - YYYY-MM-DD', found {headings[1:]}"
    versions = [tuple(int(part) for part in m.group(1).split(".")) for m in releases if m]
    dates = [m.group(2) for m in releases if m]
    assert versions == sorted(versions, reverse=True)
    assert dates == sorted(dates, reverse=True)


def test_changelog_has_a_section_for_the_package_version() -> None:
    released = [m.group(1) for h, _ in changelog_sections() if (m := RELEASE.match(h))]
    assert trialrun.__version__ in released


def test_changelog_groups_entries_under_keep_a_changelog_types_and_none_is_empty() -> None:
    for heading, lines in changelog_sections():
        groups = [line.removeprefix("### ") for line in lines if line.startswith("### ")]
        assert groups, f"{heading} has no ### group"
        assert set(groups) <= set(KEEP_A_CHANGELOG_TYPES), f"{heading}: {groups}"
        assert len(groups) == len(set(groups)), f"{heading} repeats a group: {groups}"
        text = "\n".join(lines)
        for group in groups:
            body = text.split(f"### {group}\n", 1)[1].split("\n### ", 1)[0]
            assert re.search(r"^- \S", body, re.MULTILINE), f"{heading} / {group} is empty"


def test_every_benchmark_is_described_in_perf_md_with_options_it_accepts() -> None:
    perf = read("docs/perf.md")
    scripts = sorted(path.name for path in (ROOT / "bench").glob("*.py"))
    assert scripts
    missing = [name for name in scripts if f"`{name}`" not in perf]
    assert not missing, f"docs/perf.md does not describe {missing}"
    for name, options in re.findall(r"`python bench/(\w+\.py)([^`]*)`", perf):
        source = read(f"bench/{name}")
        for option in re.findall(r"--[a-z][a-z-]*", options):
            assert f'"{option}"' in source, f"docs/perf.md: {name} has no option {option}"


def test_perf_md_names_only_benchmarks_that_exist() -> None:
    named = set(re.findall(r"\b(\w+\.py)\b", read("docs/perf.md")))
    bench = {path.name for path in (ROOT / "bench").glob("*.py")}
    assert {name for name in named if name.endswith("bench.py")} <= bench


def test_readme_describes_behaviour_without_timings_or_mechanisms() -> None:
    readme = read("README.md")
    timings = re.findall(r"\b\d[\d,.]* ?(?:ms|µs|us)\b|millisecond", readme)
    assert not timings, f"README quotes timings: {timings}"
    mechanisms = re.findall(
        r"share_cpu|\bCPUs?\b|\bfork(?:s|ed|ing)?\b|affinity|cassette's index", readme
    )
    assert not mechanisms, f"README explains internals: {mechanisms}"
    assert "[docs/perf.md](docs/perf.md)" in readme
