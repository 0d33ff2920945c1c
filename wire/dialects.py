"""Recorded A2A JSON from one dialect to the other, keeping every field both can carry.

The lossless side of replay works on the JSON an agent sent (decoded by msgspec, never
re-typed), so fields we do not model survive. These functions rename what the dialects spell
differently and copy everything else as it is:

- states (``working`` / ``TASK_STATE_WORKING``) and roles (``agent`` / ``ROLE_AGENT``);
- v0.3 ``kind`` fields (``task``, ``message``, ``status-update``, ``artifact-update`` and the
  part kinds), which v1.0 does not have;
- parts: v0.3 ``{"kind": "file", "file": {"bytes"|"uri", "name", "mimeType"}}`` is v1.0
  ``{"raw"|"url", "filename", "mediaType"}``; a v1.0 data part may hold any JSON value, a v0.3
  one only an object, so a non-object value travels as ``{"value": ...}`` with
  ``metadata.data_part_compat: true`` (the convention a2a-sdk's compatibility layer reads back);
- v0.3 ``final`` on a status update exists only there: it is dropped going to v1.0 and set from
  the state (terminal or interrupted) coming back.

What cannot be carried is listed in ``docs/replay.md``. Every function returns a new value
and leaves its input alone.
"""

from __future__ import annotations

from typing import Any

from a2a_tape.store.decode import normalise_role, normalise_state, state_in
from a2a_tape.store.events import SETTLED_STATES

Json = dict[str, Any]

_V1_PART_CONTENT = ("text", "raw", "url", "data")


def role_in(role: Any, dialect: str) -> Any:
    if not isinstance(role, str):
        return role
    norm = normalise_role(role)
    return f"ROLE_{(norm or '').upper()}" if dialect == "1.0" else norm


def status_state_in(state: Any, dialect: str) -> Any:
    if not isinstance(state, str):
        return state
    return state_in(normalise_state(state), dialect)


# -- parts ---------------------------------------------------------------------------------


def part_to_v1(p: Any) -> Any:
    if not isinstance(p, dict):
        return p
    out = {k: v for k, v in p.items() if k not in ("kind", "file")}
    f = p.get("file")
    if isinstance(f, dict):
        for old, new in (("bytes", "raw"), ("uri", "url"), ("name", "filename"), ("mimeType", "mediaType")):
            if old in f:
                out[new] = f[old]
        for k, v in f.items():  # a field of the file we do not know: kept beside the others
            if k not in ("bytes", "uri", "name", "mimeType"):
                out.setdefault(k, v)
    md = out.get("metadata")
    if (
        p.get("kind") == "data"
        and isinstance(md, dict)
        and md.get("data_part_compat") is True
        and isinstance(out.get("data"), dict)
    ):
        out["data"] = out["data"].get("value")
        rest = {k: v for k, v in md.items() if k != "data_part_compat"}
        if rest:
            out["metadata"] = rest
        else:
            del out["metadata"]
    return out


def part_to_v03(p: Any) -> Any:
    if not isinstance(p, dict):
        return p
    if "kind" in p:  # already v0.3
        return dict(p)
    if "raw" in p or "url" in p:
        f: Json = {}
        for old, new in (("raw", "bytes"), ("url", "uri"), ("filename", "name"), ("mediaType", "mimeType")):
            if old in p:
                f[new] = p[old]
        out: Json = {"kind": "file", "file": f}
        out.update({k: v for k, v in p.items() if k not in ("raw", "url", "filename", "mediaType")})
        return out
    if "data" in p and "text" not in p:
        out = {"kind": "data"}
        out.update({k: v for k, v in p.items() if k not in ("mediaType", "filename")})
        if not isinstance(p["data"], dict):
            out["data"] = {"value": p["data"]}
            md = dict(p["metadata"]) if isinstance(p.get("metadata"), dict) else {}
            md["data_part_compat"] = True
            out["metadata"] = md
        return out
    out = {"kind": "text"}
    out.update({k: v for k, v in p.items() if k not in ("mediaType", "filename")})
    return out


def _parts(parts: Any, dialect: str) -> Any:
    if not isinstance(parts, list):
        return parts
    conv = part_to_v1 if dialect == "1.0" else part_to_v03
    return [conv(p) for p in parts]


# -- messages, artifacts, status -----------------------------------------------------------


def message_in(m: Any, dialect: str) -> Any:
    if not isinstance(m, dict):
        return m
    out = {k: v for k, v in m.items() if k != "kind"}
    if "role" in out:
        out["role"] = role_in(out["role"], dialect)
    if "parts" in out:
        out["parts"] = _parts(out["parts"], dialect)
    if dialect != "1.0":
        out["kind"] = "message"
    return out


def artifact_in(a: Any, dialect: str) -> Any:
    if not isinstance(a, dict):
        return a
    out = dict(a)
    if "parts" in out:
        out["parts"] = _parts(out["parts"], dialect)
    return out


def status_in(s: Any, dialect: str) -> Any:
    if not isinstance(s, dict):
        return s
    out = dict(s)
    if "state" in out:
        out["state"] = status_state_in(out["state"], dialect)
    if "message" in out:
        out["message"] = message_in(out["message"], dialect)
    return out


def task_in(t: Any, dialect: str) -> Any:
    """A Task object (not wrapped) in ``dialect``."""
    if not isinstance(t, dict):
        return t
    out = {k: v for k, v in t.items() if k != "kind"}
    if "status" in out:
        out["status"] = status_in(out["status"], dialect)
    if isinstance(out.get("artifacts"), list):
        out["artifacts"] = [artifact_in(a, dialect) for a in out["artifacts"]]
    if isinstance(out.get("history"), list):
        out["history"] = [message_in(m, dialect) for m in out["history"]]
    if dialect != "1.0":
        out["kind"] = "task"
    return out


def status_update_in(u: Any, dialect: str) -> Any:
    if not isinstance(u, dict):
        return u
    out = {k: v for k, v in u.items() if k not in ("kind", "final")}
    if "status" in out:
        out["status"] = status_in(out["status"], dialect)
    if dialect != "1.0":
        out["kind"] = "status-update"
        if "final" in u:
            out["final"] = u["final"]
        else:
            state = normalise_state((out.get("status") or {}).get("state"))
            out["final"] = state in SETTLED_STATES
    return out


def artifact_update_in(u: Any, dialect: str) -> Any:
    if not isinstance(u, dict):
        return u
    out = {k: v for k, v in u.items() if k != "kind"}
    if "artifact" in out:
        out["artifact"] = artifact_in(out["artifact"], dialect)
    if dialect == "1.0":
        for flag in ("append", "lastChunk"):  # v1.0 omits defaults
            if out.get(flag) is False:
                del out[flag]
    else:
        out["kind"] = "artifact-update"
    return out


_CONVERT = {
    "task": task_in,
    "message": message_in,
    "status": status_update_in,
    "artifact": artifact_update_in,
}
V1_KEYS = {"task": "task", "message": "message", "status": "statusUpdate", "artifact": "artifactUpdate"}
"""The v1.0 stream wrapper key of each item kind of the internal model."""


def item_in(kind: str, obj: Any, dialect: str) -> Any:
    """One stream item (kind as :class:`store.Item` names it) in ``dialect``, unwrapped."""
    conv = _CONVERT.get(kind)
    return obj if conv is None else conv(obj, dialect)


def result_in(kind: str, obj: Any, dialect: str) -> Any:
    """One stream item as the ``result`` of a JSON-RPC response in ``dialect`` (v1.0 wraps it)."""
    body = item_in(kind, obj, dialect)
    if dialect == "1.0" and kind in V1_KEYS:
        return {V1_KEYS[kind]: body}
    return body


def recorded_object(frame: Any, kind: str) -> tuple[str, Any] | None:
    """The raw item inside one recorded response, and the dialect it is spelled in.

    ``frame`` is the decoded JSON of a payload and ``kind`` what :func:`store.decode_item`
    made of it (``task``, ``status``, ``artifact``, ``message``). None for anything else.
    """
    if not isinstance(frame, dict) or kind not in V1_KEYS:
        return None
    result = frame.get("result") if "result" in frame else frame
    if not isinstance(result, dict):
        return None
    wrapped = result.get(V1_KEYS[kind])
    if isinstance(wrapped, dict):
        return "1.0", wrapped
    if "kind" in result:
        return "0.3", result
    if kind == "task":  # a bare Task (GetTask / CancelTask answer): the state says the dialect
        status = result.get("status")
        state = status.get("state") if isinstance(status, dict) else None
        return ("1.0" if isinstance(state, str) and state.startswith("TASK_STATE") else "0.3"), result
    return None
