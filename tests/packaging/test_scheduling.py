"""tests/conftest.py's xdist scheduling: an oracle module is one unit (its suite runs once, on one worker), other
tests go in runs of neighbours of one module, the two longest oracles first."""

from __future__ import annotations

from types import SimpleNamespace

from tests import conftest


def test_an_oracle_module_is_one_scope_and_other_tests_go_in_runs_of_neighbours():
    collection = [f"tests/store/test_a.py::test_{k}" for k in range(conftest.CHUNK * 2 + 3)]
    collection += [f"tests/store/test_b.py::test_{k}" for k in range(2)]
    collection += [f"tests/oracles/test_tck1.py::test_{k}[grpc]" for k in range(30)]
    scopes = [conftest.scope_of(nodeid, collection) for nodeid in collection]
    a, b, oracle = scopes[: conftest.CHUNK * 2 + 3], scopes[-32:-30], scopes[-30:]
    assert a == [f"tests/store/test_a.py::{k // conftest.CHUNK}" for k in range(len(a))]
    assert b == ["tests/store/test_b.py::0"] * 2  # a module's count starts again
    assert set(oracle) == {"tests/oracles/test_tck1.py"}


def test_the_longest_oracles_go_first_and_the_rest_keep_their_order():
    ids = [
        "tests/capture/test_x.py::t1",
        "tests/oracles/test_fasta2a.py::t",
        "tests/oracles/test_tck1.py::t[grpc]",
        "tests/store/test_y.py::t",
        "tests/oracles/test_tck.py::t1",
        "tests/oracles/test_tck.py::t2",
        "tests/capture/test_x.py::t2",
    ]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [
        "tests/oracles/test_tck.py::t1",
        "tests/oracles/test_tck.py::t2",
        "tests/oracles/test_tck1.py::t[grpc]",
        "tests/capture/test_x.py::t1",
        "tests/oracles/test_fasta2a.py::t",
        "tests/store/test_y.py::t",
        "tests/capture/test_x.py::t2",
    ]
