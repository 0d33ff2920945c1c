"""The exporter's HTTP client the spans are sent through (capture/otlp_send.py, ``Collector``) is a private
part of the official OTLP/HTTP exporter (``OTLPSpanExporter._client``, in the release the ``otel`` extra
installs): a release without it is said at start, in one line naming the release (exit 2), on every
path that sends spans to a collector, before a log is opened, never at the first batch."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from a2a_tape.capture.otlp_send import EXPORTER, TESTED
from a2a_tape.store import open_store
from a2a_tape.store.tape import import_tape
from tests.recorder.cli.conftest import assert_bad_input, run_cli

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
RELEASE = f"opentelemetry-exporter-otlp-proto-http {version('opentelemetry-exporter-otlp-proto-http')}"


@pytest.fixture
def exporter_without_client(monkeypatch):
    """The installed exporter as a release without the client would be (the rest of it as it is)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    made = OTLPSpanExporter.__init__

    def init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        del self._client

    monkeypatch.setattr(OTLPSpanExporter, "__init__", init)


def test_the_installed_exporter_has_what_the_export_sends_through():
    from a2a_tape.capture.otlp_send import Collector

    Collector("http://127.0.0.1:4318/v1/traces").shutdown()  # the release the extra installs: no NoTransport


@pytest.mark.parametrize("command", ["proxy", "record", "export"])
def test_an_exporter_release_without_its_client_is_one_line_at_start(exporter_without_client, tmp_path, command):
    db = tmp_path / "x.db"
    collector = "http://127.0.0.1:4318"
    if command == "export":
        with open_store(db) as st, (RECORDINGS / "sdk-v10-stream.jsonl").open("rb") as fh:
            import_tape(st, fh)
        r = run_cli("export", "--all", "--format", "otlp", "--db", str(db), "--endpoint", collector)
    else:
        # (the proxy: an option refused just after the check, so that a build without it ends, not serves)
        argv = ["http://127.0.0.1:9"] + (["hello"] if command == "record" else ["--traceparent-metadata"])
        r = run_cli(command, *argv, "--otlp-endpoint", collector, "--db", str(db))
    line = assert_bad_input(r, RELEASE, f"pip install '{EXPORTER}=={TESTED}.*'")
    assert "_client" not in line
    assert command == "export" or not db.exists()  # said before the log was opened
