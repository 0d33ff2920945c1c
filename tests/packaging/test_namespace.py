"""The package as a user installs it: one ``a2a_tape`` namespace, nothing else at the top of
site-packages, a pytest plugin that leaves a project's own ``store``/``replay``/``recorder`` alone,
and a public surface with one exception root."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

import a2a_tape

ROOT = Path(__file__).resolve().parents[2]
# the rooms at the repository's top, each a2a_tape.<room> (a2a_tape/<room> is a symlink to it)
ROOMS = ("store", "wire", "capture", "fold", "replay", "inspection", "recorder", "verify", "cli")
TAPE = ROOT / "tests" / "replay" / "data" / "chunk-agent.jsonl"


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "A2A_TAPE"))}
    return env


def _all_modules() -> list[str]:
    names = ["a2a_tape"]
    for sub in ROOMS:
        pkg = importlib.import_module(f"a2a_tape.{sub}")
        names.append(pkg.__name__)
        found = pkgutil.walk_packages(pkg.__path__, prefix=f"{pkg.__name__}.")
        names += [m.name for m in found if not m.name.endswith(".__main__")]  # __main__ runs the CLI
    return names


@pytest.mark.slow
def test_the_wheel_holds_only_the_a2a_tape_namespace(tmp_path):
    """``pip wheel`` of the repository: every file is under ``a2a_tape/`` or the dist-info."""
    src = tmp_path / "src"  # a copy: setuptools writes build/ and *.egg-info next to the sources
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "build", "*.egg-info", "*.db*", ".hypothesis", "bench-*", "node_modules", ".cli-cache"
        ),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(src)],
        check=True,
        capture_output=True,
        env=_clean_env(),
        timeout=300,
    )
    (wheel,) = tmp_path.glob("a2a_tape-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"a2a_tape", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}, tops
    for sub in ROOMS:
        assert f"a2a_tape/{sub}/__init__.py" in names
    assert "a2a_tape/py.typed" in names
    ui = "a2a_tape/inspection/ui/"  # a2a-tape ui runs from the wheel alone: templates, scripts, licences
    for part in ("templates/task.html", "templates/layout.html", "static/ui.css", "static/ui.js"):
        assert ui + part in names
    for vendored in ("htmx.min.js", "htmx.LICENSE", "htmx-ext-sse.min.js", "htmx-ext-sse.LICENSE"):
        assert f"{ui}static/vendor/{vendored}" in names
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "a2a_tape.replay.pytest_plugin" in entry_points and "a2a_tape.cli:main" in entry_points


def test_importing_everything_loads_no_bare_top_level_package(tmp_path):
    """From a directory with no ``store/`` in it, importing every module of ours never loads a
    module named for a room (``store``, ``wire``, ... ``cli``)."""
    code = (
        "import importlib, sys\n"
        "from tests_helper import names\n"
        "for n in names: importlib.import_module(n)\n"
        f"bare = sorted(m for m in sys.modules if m.split('.')[0] in {ROOMS!r})\n"
        "print(len(names), bare)\n"
    )
    (tmp_path / "tests_helper.py").write_text(f"names = {_all_modules()!r}\n")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=_clean_env(), timeout=120
    )
    assert out.returncode == 0, out.stderr
    count, bare = out.stdout.split(" ", 1)
    assert int(count) > 50 and bare.strip() == "[]"


USER_TEST = """
import httpx
import pytest
from httpx_sse import connect_sse

import recorder
import replay
import store

BODY = (b'{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": '
        b'{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}')


def test_my_own_packages_are_mine():
    assert (store.MINE, replay.MINE, recorder.MINE) == ("store", "replay", "recorder")


@pytest.mark.a2a_tape("chunk.jsonl")
def test_replay_with_the_plugin(a2a_tape):
    with httpx.Client(transport=a2a_tape.transport, base_url="http://agent") as c:
        with connect_sse(c, "POST", "/", content=BODY, headers={"A2A-Version": "1.0"}) as es:
            datas = [s.data for s in es.iter_sse()]
    assert "TASK_STATE_COMPLETED" in datas[-1]
"""


def test_a_project_with_its_own_store_replay_recorder_keeps_them_and_the_plugin_works(tmp_path):
    """The pytest11 plugin is ``a2a_tape.replay.pytest_plugin``: a project whose own packages are
    called ``store``, ``replay`` and ``recorder`` collects, imports its own, and uses the marker."""
    for name in ("store", "replay", "recorder"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"MINE = {name!r}\n")
    (tmp_path / "tests").mkdir()
    shutil.copy(TAPE, tmp_path / "tests" / "chunk.jsonl")
    (tmp_path / "tests" / "test_user.py").write_text(USER_TEST)
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout


def test_the_public_surface_resolves_and_is_documented():
    assert a2a_tape.__version__ == importlib.metadata.version("a2a-tape")
    for name in a2a_tape.__all__:
        assert getattr(a2a_tape, name) is not None, name
    api = (ROOT / "docs" / "api.md").read_text()
    missing = [n for n in a2a_tape.__all__ if f"`{n}`" not in api]
    assert not missing, f"docs/api.md does not document {missing}"
    assert set(dir(a2a_tape)) >= set(a2a_tape.__all__)
    with pytest.raises(AttributeError):
        a2a_tape.no_such_name  # noqa: B018


def test_the_calls_docs_api_shows_work(tmp_path):
    """Each call docs/api.md spells out, as it spells it (``redact=`` and ``Faults.parse`` were
    documented before they existed)."""
    api = (ROOT / "docs" / "api.md").read_text()
    for shown in (
        "RecordingTransport(db, transport=inner, redact=[...], before_record_request=..., before_record_answer=...)",
        'Faults.parse("drop-after=2")',
        "ReplayTransport(recording, timing=..., faults=..., match=..., match_on=..., record_mode=..., upstream=..., "
        "before_record_request=..., before_record_answer=...)",
        'open_store(location, *, create=True, durability="full", busy_timeout=None, readonly=False)',
    ):
        assert shown in api, shown
    db = tmp_path / "log.db"
    inner = httpx.HTTPTransport()
    a2a_tape.RecordingTransport(
        db,
        transport=inner,
        redact=["X-Tenant-Pass", "params.metadata.token"],
        before_record_request=lambda request: request,
        before_record_answer=lambda answer: answer,
    ).close()
    faults = a2a_tape.Faults.parse("drop-after=2")
    assert faults.drop_after == 2 and faults.describe() == "drop-after=2"
    with pytest.raises(a2a_tape.A2ATapeError, match="drop-after"):
        a2a_tape.Faults.parse("drop-after=two")
    with a2a_tape.ReplayTransport(
        db,
        timing="instant",
        faults=faults,
        match="method-text",
        match_on=lambda request, recorded: True,
        record_mode="none",
        upstream=None,
        before_record_request=lambda request: request,
        before_record_answer=lambda answer: answer,
    ) as replay:
        assert replay.hook_errors == []
    with a2a_tape.open_store(db, create=True, durability="full", busy_timeout=None, readonly=False) as st:
        assert st.integrity_check() == "ok"


def test_every_error_of_ours_derives_from_the_one_root():
    """Catching ``a2a_tape.A2ATapeError`` catches every error class a2a-tape defines."""
    strays = []
    for name in _all_modules():
        try:
            mod = importlib.import_module(name)
        except ImportError:  # an optional extra (psycopg) not installed
            continue
        for attr, obj in vars(mod).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == name
                and not issubclass(obj, a2a_tape.A2ATapeError)
            ):
                strays.append(f"{name}.{attr}")
    assert not strays, f"errors outside the A2ATapeError root: {strays}"
