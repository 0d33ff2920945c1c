"""docs/design.md section 14 is the tree (issue 31 item 6): every room and folder it names exists,
every module it names is in that folder, and every module of the tree is named there."""

from __future__ import annotations

import re
from pathlib import Path

from tests.packaging.test_namespace import ROOMS

ROOT = Path(__file__).resolve().parents[2]
FOLDER = re.compile(r"^( *)([a-z_]+)/ ")  # "store/   the log..." or "  serve/   the replay server..."
MODULE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\.py\b")


def _tree_block() -> str:
    text = (ROOT / "docs" / "design.md").read_text()
    section = text[text.index("## 14. ") : text.index("## 15. ")]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    (tree,) = [b for b in blocks if b.startswith("store/")]
    return tree


def _documented() -> dict[str, set[str]]:
    """Folder (``store``, ``replay/serve``) -> the modules its lines name."""
    out: dict[str, set[str]] = {}
    room = folder = ""
    for line in _tree_block().splitlines():
        m = FOLDER.match(line)
        if m:
            if m.group(1):
                folder = f"{room}/{m.group(2)}"
            else:
                room = folder = m.group(2)
            out.setdefault(folder, set())
        out[folder].update(MODULE.findall(line))
    return out


def _on_disk() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for room in ROOMS:
        for f in (ROOT / room).rglob("*.py"):
            if f.name in ("__init__.py", "__main__.py"):
                continue
            out.setdefault(str(f.parent.relative_to(ROOT)), set()).add(f.stem)
    return out


def test_the_rooms_of_section_14_are_the_rooms():
    documented = _documented()
    assert [f for f in documented if "/" not in f] == list(ROOMS)


def test_section_14_names_every_module_and_no_other():
    documented, disk = _documented(), _on_disk()
    assert set(documented) == set(disk), "folders"
    for folder in sorted(disk):
        assert documented[folder] == disk[folder], (
            f"{folder}/: named but missing {sorted(documented[folder] - disk[folder])}, "
            f"not named {sorted(disk[folder] - documented[folder])}"
        )


def test_every_room_is_a_package_under_a2a_tape():
    for room in ROOMS:
        link = ROOT / "a2a_tape" / room
        assert link.is_symlink() and link.resolve() == (ROOT / room).resolve(), room
        assert (ROOT / room / "__init__.py").is_file(), room
