"""Secrets by shape, not by list (store.redact): header names, credential-looking values, query
names after percent-decoding, URLs too broken to parse. Each case was kept in clear before."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a_tape.store.redact import REDACTED, Redactor, safe_text

WORDS = ("key", "token", "secret", "auth", "password", "signature", "session", "cookie")
TOKEN_CHARS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", max_size=8)


@pytest.mark.parametrize(
    "name",
    ["Ocp-Apim-Subscription-Key", "apikey", "Private-Token", "Access-Token", "api_key", "X-Session-Id", "X-Csrf-Token"],
)
def test_credential_headers_of_common_services(name):
    assert Redactor().headers_dict([(name, "S3CRET")]) == {name.lower(): REDACTED}


@given(prefix=TOKEN_CHARS, word=st.sampled_from(WORDS), suffix=TOKEN_CHARS, upper=st.booleans())
def test_any_header_name_holding_a_secret_word(prefix, word, suffix, upper):
    name = prefix + (word.upper() if upper else word) + suffix
    if name.lower() == "idempotency-key":
        return
    assert Redactor().headers_dict([(name, "v")]) == {name.lower(): REDACTED}


@given(
    scheme=st.sampled_from(["Bearer", "bearer", "BASIC", "Token", "Digest"]), cred=st.text(min_size=1).map(str.strip)
)
def test_credential_values_whatever_the_name(scheme, cred):
    value = f"{scheme} {cred or 'x'}"
    assert Redactor().headers_dict([("Authentication", value), ("X-Forward", value)]) == {
        "authentication": REDACTED,
        "x-forward": REDACTED,
    }


def test_ordinary_headers_are_kept():
    kept = [("Content-Type", "application/json"), ("A2A-Version", "1.0"), ("Idempotency-Key", "order-42")]
    assert Redactor().headers_dict(kept) == {k.lower(): v for k, v in kept}


@pytest.mark.parametrize(
    "name", ["api%5Fkey", "api%5fkey", "API_KEY", "sslpassword", "id_token", "x%2Dsig", "access%5Ftoken", "key"]
)
def test_query_names_after_percent_decoding(name):
    url = f"http://h/p?{name}=S3CRET&page=2"
    got = Redactor().url(url)
    assert "S3CRET" not in got and got.endswith("&page=2"), got


@given(word=st.sampled_from(["api_key", "token", "client_secret", "sslpassword", "signature"]))
def test_any_percent_encoding_of_a_secret_query_name(word):
    encoded = "".join(quote(c, safe="") if i % 2 else f"%{ord(c):02X}" for i, c in enumerate(word))
    assert "S3CRET" not in Redactor().url(f"http://h/?{encoded}=S3CRET")


def test_a_url_too_broken_to_parse_loses_its_password():
    # libpq quotes the whole URI in its error when an IPv6 bracket is not closed
    line = 'invalid URI "postgresql://a2a:S3CRET@[::1:5432/db"'
    assert "S3CRET" not in safe_text(line)
    assert "a2a:%5Bredacted%5D@[::1:5432/db" in safe_text(line)


def test_a_percent_encoded_password_is_scrubbed_in_both_spellings():
    r = Redactor()
    url = "postgresql://a2a:S3%40CRET@h/db"
    _, found = r.url_secrets(url)
    assert set(found) == {"S3%40CRET", "S3@CRET"}
    assert "S3@CRET" not in r.text("the server said: S3@CRET is wrong", found)
