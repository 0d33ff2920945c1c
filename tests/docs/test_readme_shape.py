"""The README a newcomer skims in five minutes (issue 37 item 2): what it is, the two commands, a
section per job with one example that runs (tests/docs/test_blocks.py runs them), links to the
"how do I" answers; and every link of README.md and docs/*.md to a page of ours, with its anchor,
lands on a heading that exists (the prose moved to docs/recipes.md must stay reachable)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.blocks import ROOT, blocks_of, documents

README = ROOT / "README.md"
JOBS = ("Record", "Proxy", "Replay (serve)", "Replay in your tests", "Inspect", "Recover", "Verify", "Export")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation gone, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in page.read_text().splitlines() if line.startswith("#")}


def test_the_readme_is_short_and_has_a_section_per_job_each_with_an_example():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    for job in JOBS:
        (section,) = [s for s in sections if s.startswith(job)]
        assert "```" in section, f"README section {job!r} has no example"
    ran = {b.section.removeprefix("## ") for b in blocks_of(README) if b.not_run is None}
    assert all(any(s.startswith(job) for s in ran) for job in JOBS), ran
    test_command = (
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -n auto"
    )
    assert test_command in text and test_command in (ROOT / ".ci" / "run").read_text()


def test_every_link_to_a_page_of_ours_lands_on_a_heading():
    broken = []
    for page in documents():
        for target in LINK.findall(page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
