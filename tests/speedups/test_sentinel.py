"""decode_header_value (both twins) and the client-side encode_header_value."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_mcp._errors import HeaderValueError
from trio_mcp._sentinel_py import encode_header_value

ERR_BASE64 = "invalid base64 in sentinel-encoded value"
ERR_UTF8 = "sentinel-encoded value is not valid UTF-8"
ERR_CHAR = "invalid character in header value"

FIXTURE_SETTINGS = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def sentinel(payload: bytes) -> bytes:
    return b"=?base64?" + payload + b"?="


def outcome(func: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", func(*args))
    except Exception as exc:  # compared, not swallowed
        return ("error", type(exc), str(exc))


# -- decoding -----------------------------------------------------------------

SPEC_EXAMPLES = [
    (b"us-west1", "us-west1"),
    (b"=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
    (b"=?base64?IHBhZGRlZCA=?=", " padded "),
    (b"=?base64?bGluZTEKbGluZTI=?=", "line1\nline2"),
    (b"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?="),
]

VALID = [
    # literal values
    pytest.param(b"", "", id="empty-literal"),
    pytest.param(bytes(range(0x20, 0x7F)), bytes(range(0x20, 0x7F)).decode(), id="all-visible"),
    pytest.param(b"a\tb", "a\tb", id="htab-allowed"),
    pytest.param(b"\t", "\t", id="htab-alone"),
    # not sentinels: markers are case-sensitive, both needed, must not overlap
    pytest.param(b"=?BASE64?SGk=?=", "=?BASE64?SGk=?=", id="uppercase-marker"),
    pytest.param(b"=?Base64?SGk=?=", "=?Base64?SGk=?=", id="mixed-case-marker"),
    pytest.param(b"=?base64?SGk=", "=?base64?SGk=", id="prefix-only"),
    pytest.param(b"SGk=?=", "SGk=?=", id="suffix-only"),
    pytest.param(b"=?base64?=", "=?base64?=", id="overlapping-markers"),
    pytest.param(b"=?base64??", "=?base64??", id="prefix-and-question-mark"),
    pytest.param(b" =?base64?SGk=?=", " =?base64?SGk=?=", id="prefix-not-at-start"),
    pytest.param(b"=?base64?SGk=?= ", "=?base64?SGk=?= ", id="suffix-not-at-end"),
    # sentinels
    pytest.param(sentinel(b""), "", id="empty-payload"),
    pytest.param(sentinel(b"QQ=="), "A", id="two-pad"),
    pytest.param(sentinel(b"QUI="), "AB", id="one-pad"),
    pytest.param(sentinel(b"QUJD"), "ABC", id="no-pad"),
    pytest.param(sentinel(b"AA=="), "\x00", id="nul-decodes"),
    pytest.param(sentinel(b"Pz8/Pz4+"), "????>>", id="plus-slash-not-urlsafe"),
    pytest.param(sentinel(base64.b64encode(b"x" * 1000)), "x" * 1000, id="long-heap-buffer"),
    pytest.param(sentinel(base64.b64encode("é".encode() * 200)), "é" * 200, id="long-non-ascii"),
]


@pytest.mark.parametrize(("raw", "expected"), SPEC_EXAMPLES)
def test_spec_examples(impl: Any, raw: bytes, expected: str) -> None:
    assert impl.sentinel.decode_header_value(raw) == expected


@pytest.mark.parametrize(("raw", "expected"), VALID)
def test_valid(impl: Any, raw: bytes, expected: str) -> None:
    result = impl.sentinel.decode_header_value(raw)
    assert result == expected
    assert type(result) is str


INVALID = [
    # strict base64
    pytest.param(sentinel(b"SGVsbG8"), ERR_BASE64, id="missing-padding"),
    pytest.param(sentinel(b"SGVsbA==="), ERR_BASE64, id="too-much-padding"),
    pytest.param(sentinel(b"A"), ERR_BASE64, id="one-symbol"),
    pytest.param(sentinel(b"A==="), ERR_BASE64, id="three-pads"),
    pytest.param(sentinel(b"===="), ERR_BASE64, id="only-pads"),
    pytest.param(sentinel(b"SG==bG8="), ERR_BASE64, id="padding-in-the-middle"),
    pytest.param(sentinel(b"S=k="), ERR_BASE64, id="pad-then-symbol"),
    pytest.param(sentinel(b"SG=k"), ERR_BASE64, id="pad-before-last-symbol"),
    pytest.param(sentinel(b"SGVsbG9="), ERR_BASE64, id="non-canonical-one-pad"),
    pytest.param(sentinel(b"QR=="), ERR_BASE64, id="non-canonical-two-pads"),
    pytest.param(sentinel(b"SGVs bG8="), ERR_BASE64, id="space"),
    pytest.param(sentinel(b"SGVsbG8=\n"), ERR_BASE64, id="trailing-newline"),
    pytest.param(sentinel(b"-_-_"), ERR_BASE64, id="urlsafe-alphabet"),
    pytest.param(sentinel(b"SGV\xffbG8="), ERR_BASE64, id="non-ascii-byte"),
    pytest.param(sentinel(b"SGk=SGk="), ERR_BASE64, id="padding-then-more"),
    pytest.param(sentinel(b"?=SG"), ERR_BASE64, id="question-marks"),
    pytest.param(sentinel(b"QUJD" * 100 + b"QUJ"), ERR_BASE64, id="long-bad-length"),
    pytest.param(sentinel(b"QUJD" * 100 + b"QU*D"), ERR_BASE64, id="long-bad-symbol"),
    # strict UTF-8
    pytest.param(sentinel(b"/w=="), ERR_UTF8, id="utf8-ff"),
    pytest.param(sentinel(b"wK8="), ERR_UTF8, id="utf8-overlong"),
    pytest.param(sentinel(b"7aCA"), ERR_UTF8, id="utf8-surrogate"),
    pytest.param(sentinel(b"4oI="), ERR_UTF8, id="utf8-truncated"),
    pytest.param(sentinel(b"9JCAgA=="), ERR_UTF8, id="utf8-above-max"),
    pytest.param(
        sentinel(base64.b64encode(b"x" * 500 + b"\xff")), ERR_UTF8, id="utf8-long-heap-buffer"
    ),
    # literal characters
    pytest.param("café".encode(), ERR_CHAR, id="non-ascii-literal"),
    pytest.param(b"\x80", ERR_CHAR, id="byte-80"),
    pytest.param(b"a\x00b", ERR_CHAR, id="nul"),
    pytest.param(b"a\nb", ERR_CHAR, id="lf"),
    pytest.param(b"a\rb", ERR_CHAR, id="cr"),
    pytest.param(b"\x1f", ERR_CHAR, id="unit-separator"),
    pytest.param(b"a\x7f", ERR_CHAR, id="del"),
    pytest.param(b"=?BASE64?\xc3\xa9?=", ERR_CHAR, id="uppercase-marker-is-literal"),
]


@pytest.mark.parametrize(("raw", "reason"), INVALID)
def test_invalid(impl: Any, raw: bytes, reason: str) -> None:
    with pytest.raises(HeaderValueError) as excinfo:
        impl.sentinel.decode_header_value(raw)
    assert str(excinfo.value) == reason
    assert isinstance(excinfo.value, ValueError)


def test_utf8_error_hides_codec_context(impl: Any) -> None:
    with pytest.raises(HeaderValueError) as excinfo:
        impl.sentinel.decode_header_value(sentinel(b"/w=="))
    assert excinfo.value.__cause__ is None
    assert excinfo.value.__suppress_context__


@pytest.mark.parametrize(
    "raw", ["us-west1", None, 42, bytearray(b"us-west1"), memoryview(b"us-west1")]
)
def test_not_bytes(impl: Any, raw: object) -> None:
    with pytest.raises(TypeError, match=rf"^header value must be bytes, not {type(raw).__name__}$"):
        impl.sentinel.decode_header_value(raw)


def test_bytes_subclass_accepted(impl: Any) -> None:
    class B(bytes):
        pass

    assert impl.sentinel.decode_header_value(B(b"abc")) == "abc"
    assert impl.sentinel.decode_header_value(B(sentinel(b"w6k="))) == "é"


@FIXTURE_SETTINGS
@given(payload=st.binary())
def test_canonical_base64_decodes(impl: Any, payload: bytes) -> None:
    raw = sentinel(base64.b64encode(payload))
    try:
        expected = payload.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(HeaderValueError, match=ERR_UTF8):
            impl.sentinel.decode_header_value(raw)
    else:
        assert impl.sentinel.decode_header_value(raw) == expected


@FIXTURE_SETTINGS
@given(encoded=st.text(alphabet=B64_ALPHABET + "=", max_size=24))
def test_only_canonical_base64_accepted(impl: Any, encoded: str) -> None:
    """Accepted exactly when re-encoding the decoded bytes gives the same text."""
    raw = sentinel(encoded.encode())
    try:
        decoded = base64.b64decode(encoded, validate=True)
        canonical = base64.b64encode(decoded).decode() == encoded
    except ValueError:
        canonical = False
    result = outcome(impl.sentinel.decode_header_value, raw)
    if not canonical:
        assert result == ("error", HeaderValueError, ERR_BASE64)
    elif result[0] == "error":
        assert result == ("error", HeaderValueError, ERR_UTF8)
        with pytest.raises(UnicodeDecodeError):
            decoded.decode("utf-8")
    else:
        assert result[1] == decoded.decode("utf-8")


# -- encoding (client side, pure twin only) -----------------------------------

ENCODE = [
    pytest.param("us-west1", b"us-west1", id="plain"),
    pytest.param("", b"", id="empty"),
    pytest.param("Hello, 世界", b"=?base64?SGVsbG8sIOS4lueVjA==?=", id="non-ascii"),
    pytest.param(" padded ", b"=?base64?IHBhZGRlZCA=?=", id="leading-trailing-space"),
    pytest.param("x ", b"=?base64?eCA=?=", id="trailing-space"),
    pytest.param(" x", b"=?base64?IHg=?=", id="leading-space"),
    pytest.param("a b", b"a b", id="inner-space-ok"),
    pytest.param("a\tb", b"=?base64?YQli?=", id="htab"),
    pytest.param("line1\nline2", b"=?base64?bGluZTEKbGluZTI=?=", id="lf"),
    pytest.param("\x7f", b"=?base64?fw==?=", id="del"),
    pytest.param(
        "=?base64?literal?=", b"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", id="looks-like-sentinel"
    ),
    pytest.param("=?base64?=", b"=?base64?PT9iYXNlNjQ/PQ==?=", id="overlapping-look-alike"),
    pytest.param("=?BASE64?x?=", b"=?BASE64?x?=", id="uppercase-is-safe"),
    pytest.param("=?base64?x", b"=?base64?x", id="prefix-only-is-safe"),
]


@pytest.mark.parametrize(("value", "expected"), ENCODE)
def test_encode(impl: Any, value: str, expected: bytes) -> None:
    encoded = encode_header_value(value)
    assert encoded == expected
    assert impl.sentinel.decode_header_value(encoded) == value


def test_encode_rejects_non_str() -> None:
    with pytest.raises(TypeError, match=r"^header value must be str, not bytes$"):
        encode_header_value(b"x")  # type: ignore[arg-type]


def test_encode_lone_surrogate() -> None:
    with pytest.raises(UnicodeEncodeError):
        encode_header_value("\ud800")


header_text = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)),
    st.builds(lambda s: f"=?base64?{s}?=", st.text(alphabet=B64_ALPHABET + "= ?")),
    st.text(alphabet=" \t\r\n=?base64AZ"),
)


@FIXTURE_SETTINGS
@given(value=header_text)
def test_round_trip(impl: Any, value: str) -> None:
    encoded = encode_header_value(value)
    # Always safe on the wire: visible ASCII or inner SP, nothing around it.
    assert all(0x20 <= b <= 0x7E for b in encoded)
    assert encoded == encoded.strip(b" \t")
    assert impl.sentinel.decode_header_value(encoded) == value


# -- compiled vs twin ------------------------------------------------------------

raw_values = st.one_of(
    st.binary(),
    st.binary().map(sentinel),
    st.binary().map(lambda b: sentinel(base64.b64encode(b))),
    st.text(alphabet=B64_ALPHABET + "=").map(lambda s: sentinel(s.encode())),
    st.text().map(lambda s: sentinel(base64.b64encode(s.encode("utf-8", "surrogatepass")))),
    st.lists(st.sampled_from([b"=?base64?", b"?=", b"=", b"?", b"QQ", b"\t", b" ", b"\xc3"])).map(
        b"".join
    ),
)


@FIXTURE_SETTINGS
@given(raw=raw_values)
def test_compiled_matches_twin(py_impl: Any, compiled_impl: Any, raw: bytes) -> None:
    expected = outcome(py_impl.sentinel.decode_header_value, raw)
    assert outcome(compiled_impl.sentinel.decode_header_value, raw) == expected


@pytest.mark.parametrize("raw", ["x", None, 1, bytearray(b"x"), memoryview(b"x"), [b"x"]])
def test_compiled_matches_twin_on_wrong_types(
    py_impl: Any, compiled_impl: Any, raw: object
) -> None:
    expected = outcome(py_impl.sentinel.decode_header_value, raw)
    assert expected[:2] == ("error", TypeError)
    assert outcome(compiled_impl.sentinel.decode_header_value, raw) == expected
