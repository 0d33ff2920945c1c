"""Redaction before the disk: secrets never reach the database file.

Secrets are found by their shape, not from a list (docs/design.md, "Trust boundaries"):

- a header whose name contains ``key``, ``token``, ``secret``, ``auth``, ``passw``/``pwd``,
  ``signature``, ``session``, ``cookie`` or ``credential`` (``Authorization``, ``Set-Cookie``,
  ``Ocp-Apim-Subscription-Key``, ``apikey``, ``Private-Token``, ...), and any header whose value
  looks like a credential (``Bearer ...``, ``Basic ...``, ``Token ...``, ``Digest ...``), is
  replaced by ``[redacted]``, plus the names the user configures. ``Idempotency-Key`` is not a
  credential: the proxy keeps it in its own column;
- in a URL: the password of a ``user:password@`` (``%5Bredacted%5D``, the marker
  percent-encoded), the user name when it is the credential (in an http(s)/ws(s) URL: an empty
  password, ``https://sk_live_X:@host``, or a user name shaped like a token, ``https://TOKEN@host``), and the value of each query parameter whose name, percent-decoded, has the
  shape (``sslpassword``, ``id_token``; ``key``, ``sig``, ``code`` only as a whole word:
  ``api%5Fkey`` but not ``keyword``); a URL too broken to parse (an unclosed IPv6 bracket) still loses its password;
- a JWT (``eyJ...`` ``.`` ``eyJ...`` ``.`` signature) whatever the header or query name that carries it
  (``Cf-Access-Jwt-Assertion``, ``X-Goog-IAP-JWT-Assertion``, ``?jwt=``), and in every printed text;
- a credential the exchange itself sent (a secret header's value, a URL's secret) that comes back
  in what the agent answers (``invalid key SECRET``): :meth:`Redactor.scrub`, with a note;
- a request body sent with a ``Content-Encoding`` (gzip, deflate) is redacted on its decoded form
  (:meth:`Redactor.request_payload`): a configured path never reaches the disk compressed.

A push-notification config's ``token`` and ``authentication.credentials`` are replaced wherever
a JSON payload holds one (a request registering a webhook, a config the agent echoes), with no
configuration: the token a client gives the agent is a credential of its webhook.

JSON paths (``params.message.metadata.token``, ``*`` matching any key or list index) are replaced
inside request bodies, event payloads and JSON answers (:meth:`Redactor.payload`); a payload that
has none of the configured paths keeps its exact bytes. A payload that is not valid JSON (one
invalid UTF-8 byte is enough) but holds a configured key is redacted at byte level (``"key":
value`` -> ``"key": "[redacted]"``) or, when the value cannot be delimited that way, replaced
whole by :data:`MARKER`, with a note saying so: never stored in clear.

Printing: :func:`safe_text` is the same URL/header redaction for every line we print (errors,
human lines, logs, JSON documents, a database driver's own messages): ``user:password@``,
secret-named query parameters and ``Authorization: Bearer ...`` style values never reach stdout
or stderr either.

Configuration comes from a ``[tool.a2a-tape]`` table in ``pyproject.toml`` of the current
directory (``redact_headers = [...]``, ``redact_json_paths = [...]``) and from ``--redact``
options (a name with a dot or starting with ``$`` is a JSON path, anything else a header).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

import msgspec

from a2a_tape.store.errors import StoreError
from a2a_tape.store.json_values import decode_json

REDACTED = "[redacted]"
_REDACTED_USERINFO = "%5Bredacted%5D"  # the same marker, percent-encoded for a URL's userinfo
DEFAULT_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key"})

_SECRET_WORDS = r"key|token|secret|auth|passw|pwd|signature|session|cookie|credential"
_SECRET_NAME = re.compile(_SECRET_WORDS, re.I)  # anywhere in a header or query name
_NOT_SECRET = frozenset({"idempotency-key"})  # the proxy's dedup key, kept in its own column
# a value that is a credential whatever its header's name: "Bearer x", "Basic x", "Token x", "Digest x"
_CREDENTIAL_VALUE = re.compile(r"\s*(?:bearer|basic|token|digest)\s+\S", re.I)
# a query name: the long words anywhere ("sslpassword", "id_token"), the short ones as the whole name
# or its last part ("key", "api_key", "apikey", "x-sig", "oauth.code"; not "monkey" nor "keyword")
_SECRET_PARAM = re.compile(
    r"(token|secret|passw|signature|session|cookie|credential)|(^(.*[-_.])?(api)?(key|sig|code|pwd|pass|auth|authorization)$)",
    re.I,
)

# a JSON Web Token: two base64url JSON objects ("eyJ" is '{"') and a signature, dot-separated
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
# in these schemes a user name is the credential when its password is empty ("https://sk_live_X:@host")
# or when it looks like a token ("https://ghp_16C7e42F292c6912E7710c8@host": 16+ characters, letters and
# digits); "https://me@host" is a user name and stays
_USER_IS_CREDENTIAL = frozenset({"http", "https", "ws", "wss"})
_TOKEN_LIKE = re.compile(r"(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9._~%+/=-]{16,}$")
MIN_ECHO = 8  # shorter values sent as credentials are not searched for in answers (too many false hits)
MAX_DECODED_REQUEST = 64 * 1024 * 1024  # a coded request body is decoded this far for redaction, no further

_URL_IN_TEXT = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
_USERINFO_PASSWORD = re.compile(r"^([^:/?#@]*:)([^@/?#]*)(@)")  # in what follows "scheme://"
# "Authorization: Bearer T", "authorization=Basic T", "x-api-key: T", "sslpassword=T" in a free text
_HEADER_IN_TEXT = re.compile(
    r"(?i)\b([\w-]*(?:" + _SECRET_WORDS + r")[\w-]*)(\s*[:=]\s*)"
    r"((?:bearer|basic|token|digest)\s+)?(?!\[redacted\])([^\s,;&'\"]+)"
)
_BEARER_IN_TEXT = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/=-]{4,})")
MARKER = b'{"a2a-tape":{"redacted":"the payload is not JSON and holds a configured secret key"}}'

_encoder = msgspec.json.Encoder()


class Redactor:
    """Decides what is kept. Immutable once built; cheap to call on the hot path."""

    def __init__(self, headers: Iterable[str] = (), json_paths: Iterable[str] = ()) -> None:
        self.headers = DEFAULT_HEADERS | {h.strip().lower() for h in headers if h.strip()}
        self.json_paths: tuple[tuple[str, ...], ...] = tuple(_parse_path(p) for p in json_paths if p.strip())
        self._keys = _key_names(self.json_paths)  # what a payload that is not JSON is searched for

    def is_secret_header(self, name: str) -> bool:
        """A header (or query) name shaped like a credential's, or configured."""
        low = name.lower()
        return low in self.headers or (bool(_SECRET_NAME.search(low)) and low not in _NOT_SECRET)

    @staticmethod
    def is_secret_value(value: str) -> bool:
        """A value shaped like a credential (``Bearer ...``, ``Basic ...``) whatever its name."""
        return _CREDENTIAL_VALUE.match(value) is not None or _JWT.search(value) is not None

    def is_secret(self, name: str, value: str) -> bool:
        """Whether a header is a secret, by its name or by its value."""
        return self.is_secret_header(name) or self.is_secret_value(value)

    def headers_dict(self, headers: Iterable[tuple[str, str]] | Mapping[str, str]) -> dict[str, str]:
        """Headers as a dict with secret values replaced (repeated names joined with ``, ``)."""
        items = headers.items() if isinstance(headers, Mapping) else headers
        out: dict[str, str] = {}
        for k, v in items:
            value = REDACTED if self.is_secret(k, v) else v
            key = k.lower()
            out[key] = f"{out[key]}, {value}" if key in out else value
        return out

    def url(self, url: str) -> str:
        """``url`` with its secrets replaced: a userinfo password, and the value of each query
        parameter named like a secret (or like a configured header). The rest is kept as it is."""
        return self.url_secrets(url)[0]

    def url_secrets(self, url: str) -> tuple[str, list[str]]:
        """:meth:`url`, and the values it replaced (to scrub from error texts too)."""
        if "@" not in url and "?" not in url:
            return url, []
        try:
            parts = urlsplit(url)
        except ValueError:  # too broken to parse (an unclosed IPv6 bracket): the password still goes
            return _broken_url(url)
        found: list[str] = []
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            user, sep, password = userinfo.partition(":")
            if sep and password:
                found += _spellings(password)
                netloc = f"{user}:{_REDACTED_USERINFO}@{host}"  # brackets would read as an IPv6 host
            elif user and parts.scheme.lower() in _USER_IS_CREDENTIAL and (sep or _TOKEN_LIKE.match(user)):
                found += _spellings(user)
                netloc = f"{_REDACTED_USERINFO}{sep}@{host}"
        query = parts.query
        if query:
            fields = []
            for field in query.split("&"):
                name, eq, value = field.partition("=")
                if eq and value and (self.is_secret_param(name) or _JWT.search(unquote_plus(value))):
                    found += _spellings(value)
                    field = f"{name}={REDACTED}"
                fields.append(field)
            query = "&".join(fields)
        if not found:
            return url, []
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)), found

    def is_secret_param(self, name: str) -> bool:
        """A query parameter's name (as written, percent-encoded or not) shaped like a secret's."""
        plain = unquote_plus(name)
        return bool(_SECRET_PARAM.search(plain)) or plain.lower() in self.headers

    def redacts(self, payload: bytes) -> bool:
        """Whether :meth:`payload` may change ``payload`` (a configured path, or a push config's secrets)."""
        return bool(self.json_paths) or _pushes(payload)

    def json_bytes(self, payload: bytes) -> bytes:
        """``payload`` with the configured JSON paths replaced; the same bytes when none matched.
        Not JSON: see :meth:`payload` (byte level, or the whole payload replaced)."""
        return self.payload(payload)[0]

    def payload(self, payload: bytes) -> tuple[bytes, str | None]:
        """``(bytes to store, note)``: the configured JSON paths replaced in a JSON payload; in a
        payload that is not JSON, each configured key's scalar value replaced at byte level, or
        the whole payload replaced by :data:`MARKER` when a value cannot be delimited. ``note``
        says what was done to a non-JSON payload (None: nothing, or a plain JSON redaction)."""
        if not payload:
            return payload, None
        push = _pushes(payload)  # a push config's secrets, by shape
        if not self.json_paths and not push:
            return payload, None
        try:
            doc = decode_json(payload)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return self._bytes_level(payload) if self.json_paths else (payload, None)
        hit = push and _push_secrets(doc)
        for path in self.json_paths:
            hit |= _replace(doc, path)
        return (_encoder.encode(doc) if hit else payload), None

    def _bytes_level(self, payload: bytes) -> tuple[bytes, str | None]:
        keys = self._keys
        if keys is None:  # a path that ends in * or an index: any non-JSON payload may hold it
            return MARKER, "a payload that is not JSON was replaced whole (a configured path has no key name)"
        out = payload
        for key in keys:
            if key not in out:
                continue
            name = re.escape(key)
            out = re.sub(rb'("' + name + rb'"\s*:\s*)("(?:[^"\\]|\\.)*"|[^\s,{}\[\]"]+)', rb'\1"[redacted]"', out)
            if re.search(rb'"' + name + rb'"\s*+:\s*+(?!"\[redacted\]")', out):
                return MARKER, f"a payload that is not JSON held the configured key {key.decode()!r}: replaced whole"
        if out is payload:
            return payload, None
        return out, "a payload that is not JSON had configured keys redacted at byte level"

    def text(self, value: str, secrets: Iterable[str] = ()) -> str:
        """A free text (an error message) with ``secrets`` and the secrets of any URL in it replaced."""
        for s in secrets:
            if s:
                value = value.replace(s, REDACTED)
        if "://" in value:
            value = _URL_IN_TEXT.sub(lambda m: self.url(m.group(0)), value)
        if _SECRET_NAME.search(value) or "earer" in value:
            value = _HEADER_IN_TEXT.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{REDACTED}", value)
            value = _BEARER_IN_TEXT.sub(lambda m: f"{m.group(1)}{REDACTED}", value)
        if "eyJ" in value:
            value = _JWT.sub(REDACTED, value)
        return value

    def secret_values(self, headers: Iterable[tuple[str, str]] | Mapping[str, str]) -> list[str]:
        """The values of the secret headers among ``headers`` (and the credential after a scheme
        word: ``Bearer T`` gives ``T`` too): what an answer must not echo (:meth:`scrub`)."""
        items = headers.items() if isinstance(headers, Mapping) else headers
        return credential_parts(v for k, v in items if self.is_secret(k, v))

    @staticmethod
    def scrub(payload: bytes, secrets: Iterable[str]) -> tuple[bytes, bool]:
        """``payload`` with each of ``secrets`` (as written, and as a JSON string spells it)
        replaced by the marker; True when one was there. Values shorter than :data:`MIN_ECHO`
        are left alone. A JSON payload stays JSON: the secret was inside one of its strings."""
        hit = False
        for s in secrets:
            if len(s) < MIN_ECHO:
                continue
            for form in dict.fromkeys((s.encode(), _encoder.encode(s)[1:-1])):
                if form in payload:
                    payload = payload.replace(form, REDACTED.encode())
                    hit = True
        return payload, hit

    def request_payload(self, body: bytes, coding: str | None) -> tuple[bytes, str | None]:
        """A request body for the log: :meth:`payload`, on the decoded form when the body has a
        ``Content-Encoding`` (gzip, x-gzip, deflate). A decoded body the configured paths changed
        is stored decoded and redacted (with a note); one they do not touch keeps its exact bytes;
        one that cannot be decoded here (another coding, bad bytes, past
        :data:`MAX_DECODED_REQUEST`) is replaced by :data:`MARKER` when paths are configured."""
        coding = (coding or "").strip().lower()
        if not self.json_paths or not body or coding in ("", "identity"):
            return self.payload(body)
        plain = _decode_request(body, coding)
        if plain is None:
            return MARKER, f"a request body with content-encoding {coding!r} could not be decoded: replaced whole"
        out, note = self.payload(plain)
        if out == plain and note is None:
            return body, None
        return out, note or f"the request body was {coding}-coded: stored decoded, with its configured paths redacted"


def safe_text(text: str, redactor: Redactor | None = None, secrets: Iterable[str] = ()) -> str:
    """A line we print, with the same URL and header redaction as the disk: every error text,
    human line and log line goes through it before stdout or stderr."""
    return (redactor or _DEFAULT).text(text, secrets)


def safe_urls(text: str, redactor: Redactor | None = None) -> str:
    """Only the URLs of ``text`` redacted (a JSON document we print: its data stays as stored)."""
    if "://" not in text:
        return text
    r = redactor or _DEFAULT
    return _URL_IN_TEXT.sub(lambda m: r.url(m.group(0)), text)


printable = safe_text
_DEFAULT: Redactor


def credential_parts(values: Iterable[str]) -> list[str]:
    """Each value, and the credential after its scheme word (``Bearer T``: ``T``), once each."""
    out: list[str] = []
    for v in values:
        v = v.strip()
        scheme, sp, rest = v.partition(" ")
        for part in (v, rest.strip() if sp and _CREDENTIAL_VALUE.match(v) else ""):
            if part and part not in out:
                out.append(part)
    return out


def _decode_request(body: bytes, coding: str) -> bytes | None:
    """``body`` with its codings undone (gzip, x-gzip, deflate; the last applied first), at most
    :data:`MAX_DECODED_REQUEST` bytes; None when it cannot be decoded here."""
    codings = [c.strip() for c in coding.split(",") if c.strip() not in ("", "identity")]
    if len(codings) > 2:
        return None
    for c in reversed(codings):
        if c in ("gzip", "x-gzip"):
            obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif c == "deflate":
            obj = zlib.decompressobj(zlib.MAX_WBITS if body[:1] == b"\x78" else -zlib.MAX_WBITS)
        else:
            return None
        try:
            out = obj.decompress(body, MAX_DECODED_REQUEST)
        except zlib.error:
            return None
        if obj.unconsumed_tail or not obj.eof:
            return None  # past the bound, or cut short
        body = out
    return body


def _spellings(value: str) -> list[str]:
    """A secret as written in a URL and percent-decoded (a message may quote either)."""
    plain = unquote_plus(value)
    return [value] if plain == value else [value, plain]


def _broken_url(url: str) -> tuple[str, list[str]]:
    """A URL ``urlsplit`` refuses, with the password of its userinfo replaced all the same."""
    scheme, sep, rest = url.partition("://")
    m = _USERINFO_PASSWORD.match(rest) if sep else None
    if m is None or not m.group(2):
        return url, []
    return f"{scheme}://{m.group(1)}{_REDACTED_USERINFO}{m.group(3)}{rest[m.end() :]}", _spellings(m.group(2))


def _key_names(paths: tuple[tuple[str, ...], ...]) -> tuple[bytes, ...] | None:
    """The last key name of each path (None: a path has no name at all, ``*`` or ``0`` only)."""
    keys = []
    for path in paths:
        name = next((p for p in reversed(path) if p != "*" and not p.isdigit()), None)
        if name is None:
            return None
        keys.append(name.encode())
    return tuple(keys)


def _parse_path(path: str) -> tuple[str, ...]:
    p = path.strip()
    if p.startswith("$"):
        p = p[1:].lstrip(".")
    p = re.sub(r"\[(\d+|\*)\]", r".\1", p)
    parts = tuple(x for x in p.split(".") if x)
    if not parts:
        raise StoreError(f"empty JSON path in redaction config: {path!r}")
    return parts


_PUSH_TOKEN = b'"token"'
_PUSH_CREDENTIALS = b'"credentials"'


def _pushes(payload: bytes) -> bool:
    """Whether ``payload`` may hold a push config's secrets (a ``"token"`` or ``"credentials"`` key).
    ``find``, not ``in``: CPython's ``bytes in bytes`` first tries the operand as an integer and
    builds a TypeError's message before it searches (~2,400 instructions each, twice per recorded
    event and per relayed gRPC message twice more: docs/performance.md section 23)."""
    return payload.find(_PUSH_TOKEN) >= 0 or payload.find(_PUSH_CREDENTIALS) >= 0


def _push_secrets(node: Any) -> bool:
    """A push-notification config's secrets replaced wherever it stands (a send's configuration, a
    config call, a config echoed by get or list): the ``token`` of an object that names a ``url``,
    the ``credentials`` of an ``authentication`` object. The token the agent sends back in
    ``X-A2A-Notification-Token`` is a header named like a secret: redacted by name."""
    hit = False
    if isinstance(node, dict):
        if isinstance(node.get("url"), str) and isinstance(node.get("token"), str) and node["token"]:
            node["token"] = REDACTED
            hit = True
        auth = node.get("authentication")
        if isinstance(auth, dict) and auth.get("credentials"):
            auth["credentials"] = REDACTED
            hit = True
        children: Iterable[Any] = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return False
    for child in children:
        if isinstance(child, (dict, list)):
            hit |= _push_secrets(child)
    return hit


def _replace(node: Any, path: tuple[str, ...]) -> bool:
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        keys: list[str] | list[int] = list(node) if head == "*" else ([head] if head in node else [])
    elif isinstance(node, list):
        if head == "*":
            keys = list(range(len(node)))
        elif head.isdigit() and int(head) < len(node):
            keys = [int(head)]
        else:
            return False
    else:
        return False
    hit = False
    for k in keys:  # the same walk for object members and list items
        if rest:
            hit |= _replace(node[k], rest)
        else:
            node[k] = REDACTED
            hit = True
    return hit


class _Config(msgspec.Struct, rename="kebab"):
    redact_headers: list[str] = []
    redact_json_paths: list[str] = []


def load_config(directory: str | os.PathLike[str] | None = None) -> tuple[list[str], list[str]]:
    """``(redact_headers, redact_json_paths)`` from ``[tool.a2a-tape]`` in ./pyproject.toml."""
    path = Path(directory or os.getcwd()) / "pyproject.toml"
    if not path.is_file():
        return [], []
    import tomllib  # here: a command run where there is no pyproject.toml never parses one

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        raise StoreError(f"cannot read redaction config from {path}: {exc}") from None
    table = doc.get("tool", {}).get("a2a-tape", {})
    if not isinstance(table, dict):
        return [], []
    # accept both redact_headers and redact-headers spellings
    norm = {
        k.replace("_", "-"): v
        for k, v in table.items()
        if k.replace("_", "-") in ("redact-headers", "redact-json-paths")
    }
    try:
        cfg = msgspec.convert(norm, _Config)
    except msgspec.ValidationError as exc:
        raise StoreError(f"bad [tool.a2a-tape] redaction config in {path}: {exc}") from None
    return cfg.redact_headers, cfg.redact_json_paths


def build_redactor(options: Iterable[str] = (), directory: str | os.PathLike[str] | None = None) -> Redactor:
    """The redactor for this run: defaults + pyproject config + ``--redact`` options."""
    headers, paths = load_config(directory)
    for opt in options:
        for name in opt.split(","):
            name = name.strip()
            if not name:
                continue
            if name.startswith("$") or "." in name:
                paths.append(name)
            else:
                headers.append(name)
    return Redactor(headers, paths)


_DEFAULT = Redactor()  # the defaults: what every printed line is scrubbed of


def safe_location(location: str) -> str:
    """The location without a password (nor a secret parameter: ``?sslpassword=``), fit for
    messages and tape headers."""
    if "://" in location and "@" in location:
        scheme, rest = location.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        location = f"{scheme}://{creds.split(':', 1)[0]}@{host}"
    return Redactor().url(location) if "?" in location else location
