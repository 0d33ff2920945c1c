"""docs/cli.md is the ``--help`` of every command: this fails when they disagree."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_cli", ROOT / "docs" / "gen_cli.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_docs_cli_md_matches_help_of_every_command():
    gen = _gen()
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    expected = gen.render()
    assert current == expected, "docs/cli.md disagrees with --help: run `python docs/gen_cli.py` and commit docs/cli.md"


def test_every_command_has_a_section_with_its_usage():
    gen = _gen()
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    names = gen.commands()
    assert {"doctor", "diff", "grep", "show", "export", "import"} <= set(names)
    for name in names:
        assert f"## a2a-tape {name}\n" in text
        assert f"Usage: a2a-tape {name} " in text


def test_check_mode_of_the_generator_runs_as_a_script():
    r = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_cli.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
