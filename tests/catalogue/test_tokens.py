"""Link tokens: signed for one user and one purpose, expiring, and different every time."""

from __future__ import annotations

from catalogue.tokens import TokenSigner


class StaticKey:
    def __init__(self, key: bytes) -> None:
        self.key = key

    def signing_key(self) -> bytes:
        return self.key


def test_a_token_verifies_for_its_purpose_until_it_expires() -> None:
    # Given a signer with a one-hour lifetime
    signer = TokenSigner(StaticKey(b"k" * 32), ttl_seconds=3600)
    # When a token is issued
    token = signer.issue("u-1", "email-verification", now=1_000)
    # Then it verifies for that purpose before its expiry, and not after, nor for another purpose
    claims = signer.verify(token, "email-verification", now=1_500)
    assert claims is not None and (claims.user_id, claims.expires_at) == ("u-1", 4_600)
    assert signer.verify(token, "email-verification", now=4_600) is None
    assert signer.verify(token, "password-reset", now=1_500) is None


def test_tampered_tokens_and_other_keys_are_refused() -> None:
    # Given a token / When its user id is swapped or another key checks it / Then it is refused
    signer = TokenSigner(StaticKey(b"k" * 32))
    token = signer.issue("u-1", "password-reset", now=0)
    other = signer.issue("u-2", "password-reset", now=0)
    forged = ".".join([*token.split(".")[:1], other.split(".")[1], *token.split(".")[2:]])
    assert signer.verify(forged, "password-reset", now=1) is None
    assert TokenSigner(StaticKey(b"x" * 32)).verify(token, "password-reset", now=1) is None
    assert signer.verify("not-a-token", "password-reset", now=1) is None


def test_every_issue_is_a_fresh_token() -> None:
    # Given one user and purpose / When issued twice at the same instant / Then two different tokens (nonce)
    signer = TokenSigner(StaticKey(b"k" * 32))
    assert signer.issue("u-1", "password-reset", now=0) != signer.issue("u-1", "password-reset", now=0)
