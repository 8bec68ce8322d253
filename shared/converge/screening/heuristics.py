"""The second net: value heuristics for PII and secrets that an identifier's structure did not exclude.

`screen(value)` names the first kind a value looks like, or None. Each kind is a precise rule, not
a loose pattern: an e-mail address needs a local part, an `@` (or a lookalike or spelled-out "at")
and a dotted domain; a card number needs an issuer prefix and a Luhn check; an IBAN its country's
length and mod 97; a phone number a phone's punctuation (a leading `+`, `tel:`, an area code in
parentheses, a trunk `0` with groups), because an unpunctuated phone number and a digit-only id
cannot be told apart. Precision and recall are measured on the corpus in
tests/unit/test_heuristics_corpus.py.

Linear time: the caller caps the value's length (converge.screening.limits) before any of this runs; the
value is normalized once (NFKC, format characters dropped) and split into words and tokens once;
each rule then either scans the text in one pass or `fullmatch`es single tokens against patterns
that have a literal start and no nested or adjacent overlapping quantifiers.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from enum import StrEnum
from functools import cached_property

from converge.screening import checksums, secret_formats


class Kind(StrEnum):
    """What a refused value looked like; the name shown in refusals and used to allow a field."""

    PRIVATE_KEY = "private_key"
    CONTROL = "control_characters"
    JWT = "jwt"
    URL_CREDENTIALS = "url_credentials"
    CREDENTIAL = "credential"
    CLOUD_KEY = "cloud_key"
    VENDOR_KEY = "vendor_key"
    EMAIL = "email"
    IBAN = "iban"
    PAYMENT_CARD = "payment_card"
    NATIONAL_ID = "national_id"
    PHONE = "phone"
    SECRET = "secret"

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    Kind.PRIVATE_KEY: "a private key",
    Kind.CONTROL: "text with control characters",
    Kind.JWT: "a JWT",
    Kind.URL_CREDENTIALS: "a URL carrying credentials",
    Kind.CREDENTIAL: "a credential behind a name or an auth scheme",
    Kind.CLOUD_KEY: "a cloud provider's key",
    Kind.VENDOR_KEY: "a vendor's API key",
    Kind.EMAIL: "an e-mail address",
    Kind.IBAN: "an IBAN",
    Kind.PAYMENT_CARD: "a payment card number",
    Kind.NATIONAL_ID: "a national identity number",
    Kind.PHONE: "a phone number",
    Kind.SECRET: "a high-entropy secret",
}

_TOKEN_SPLIT = re.compile(r"[\s\"'`,;=&?<>()\[\]{}|\\^]+")
_PIECE_SPLIT = re.compile(r"[:/#]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SPELLED_AT = re.compile(r" ?[\[({<] ?(?:at|@) ?[\])}>] ?| at |_at_", re.IGNORECASE)
_SPELLED_DOT = re.compile(r" ?[\[({<] ?dot ?[\])}>] ?| dot |_dot_", re.IGNORECASE)
_ENTITIES = (("&#64;", "@"), ("&commat;", "@"), ("%40", "@"), ("&#46;", "."), ("&period;", "."))
_EMAIL_LOCAL = frozenset("._%+-'!#$&*/=?^`{|}~")
_RETINA = re.compile(r"\d{1,2}x")
_DIGIT_RUN = re.compile(r"\d+(?:[ .-]\d+)*")
_SEPARATOR = re.compile(r"([ .-])")
_IBAN_START = re.compile(r"(?<![A-Z0-9])[A-Z]{2}\d{2}")
_SSN = re.compile(r"(?<![\d-])(\d{3})([- ])(\d{2})\2(\d{4})(?![\d-])")
_NINO = re.compile(r"(?<![A-Z0-9])([A-Z]{2}) ?\d{2} ?\d{2} ?\d{2} ?[A-D](?![A-Z0-9])")
_DNI = re.compile(r"(?<![A-Z0-9])([XYZ]\d{7}|\d{8})-?([A-Z])(?![A-Z0-9])")
_FISCAL_CODE = re.compile(r"(?<![A-Z0-9])[A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z](?![A-Z0-9])")
_CPF = re.compile(r"(?<![\d.])(\d{3})\.(\d{3})\.(\d{3})-(\d{2})(?![\d.-])")
_SIN = re.compile(r"(?<![\d-])(\d{3})([ -])(\d{3})\2(\d{3})(?![\d-])")
_PERSONNUMMER = re.compile(r"(?<![\d-])(?:19|20)?(\d{6})[-+](\d{4})(?![\d-])")
_AADHAAR = re.compile(r"(?<!\d)(\d{4}) (\d{4}) (\d{4})(?!\d)")
_CN_ID = re.compile(r"(?<![0-9A-Z])[1-9]\d{5}(?:19|20)\d{9}[\dX](?![0-9A-Z])")
_NIR = re.compile(r"(?<![\dA-Z])([12]) ?(\d{2}) ?(0[1-9]|1[0-2]) ?(\d{2}|2[AB]) ?(\d{3}) ?(\d{3}) ?(\d{2})(?![\dA-Z])")
_PHONE_PLUS = re.compile(r"(?<![\w+])\+[1-9][\d ().-]{6,22}\d")
_PHONE_00 = re.compile(r"(?<![\w.-])00[1-9]\d{0,3}[ .-][\d ().-]{5,20}\d")
_PHONE_TEL = re.compile(r"tel:[+\d(][\d ().-]{3,24}", re.IGNORECASE)
_PHONE_AREA = re.compile(r"(?<![\w(])\(\d{2,5}\) ?\d{2,4}[ .-]?\d{3,4}(?![\d-])")
_PHONE_NANP = re.compile(r"(?<![\w.-])\d{3}([ .-])\d{3}\1\d{4}(?![\w.-])")
_PHONE_TRUNK = re.compile(r"(?<![\w.-])0\d{1,4}(?:([ .])\d{2,8}(?:\1\d{2,8}){0,4}|-\d{4,8})(?![\w.-])")


class Probe:
    """One value, normalized once, with the views the rules share (each built on first use)."""

    def __init__(self, value: str) -> None:
        self.raw = value
        normalized = unicodedata.normalize("NFKC", value)
        # Zero-width and other format characters hide an `@` or split a key; they carry no meaning here.
        self.text = "".join(char for char in normalized if unicodedata.category(char) != "Cf")

    @cached_property
    def upper(self) -> str:
        return self.text.upper()

    @cached_property
    def words(self) -> list[str]:
        return self.text.split()

    @cached_property
    def tokens(self) -> list[str]:
        return [token for token in _TOKEN_SPLIT.split(self.text) if token]

    @cached_property
    def pieces(self) -> list[str]:
        """The tokens, and what `:`, `/` and `#` join inside them: a key behind a scheme-like prefix
        (`bearer:sk_live_…`, `aws:AKIA…`), in a URL's path (`https://…/hooks/sk_live_…`) or after a `#`, and
        the rest of a token after its first `:` (a Telegram bot token holds one). Each token is split once."""
        found = list(self.tokens)
        for token in self.tokens:
            if ":" in token or "/" in token or "#" in token:
                found += [piece for piece in _PIECE_SPLIT.split(token) if piece]
                _, colon, rest = token.partition(":")
                if colon and rest and ":" in rest:
                    found.append(rest)
        return found

    @cached_property
    def collapsed(self) -> str:
        return " ".join(self.words)


def screen(value: str, skip: frozenset[Kind] = frozenset()) -> Kind | None:
    """The first kind of PII or secret `value` looks like (skipping those in `skip`), or None."""
    probe = Probe(value)
    for kind, rule in _RULES:
        if kind not in skip and rule(probe):
            return kind
    return None


# --- contact data -------------------------------------------------------------------------------------------


def email(probe: Probe) -> bool:
    """local@domain.tld, also with a lookalike `@` (NFKC folds the fullwidth and the small commercial at),
    as an entity or percent-escape, or spelled out: `alice (at) example (dot) com`, `alice at example dot com`."""
    text = probe.collapsed
    for entity, char in _ENTITIES:
        if entity in text.lower():
            text = re.sub(re.escape(entity), char, text, flags=re.IGNORECASE)
    text = _SPELLED_DOT.sub(".", _SPELLED_AT.sub("@", text))
    return _has_address(text)


def _has_address(text: str) -> bool:
    # One pass: around each `@`, the local part reaches back and the domain forward to the nearest
    # character neither may hold, so every character is looked at at most twice.
    at = text.find("@")
    while at >= 0:
        start = at
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in _EMAIL_LOCAL):
            start -= 1
        end = at + 1
        while end < len(text) and (text[end].isalnum() or text[end] in ".-"):
            end += 1
        if at - start >= 1 and _domain(text[at + 1 : end].rstrip(".")):
            return True
        at = text.find("@", at + 1)
    return False


def _domain(domain: str) -> bool:
    labels = domain.split(".")
    if _RETINA.fullmatch(labels[0]):
        return False  # `icon@2x.png`: an image's scale suffix, not an address
    return len(labels) >= 2 and all(labels) and len(labels[-1]) >= 2 and labels[-1].isalpha()


def phone(probe: Probe) -> bool:
    text = probe.collapsed
    if _PHONE_TEL.search(text):
        return True
    for pattern, low, high in (
        (_PHONE_PLUS, 8, 15),
        (_PHONE_00, 10, 15),
        (_PHONE_AREA, 9, 12),
        (_PHONE_NANP, 10, 10),
        (_PHONE_TRUNK, 9, 15),
    ):
        for match in pattern.finditer(text):
            digits = "".join(char for char in match.group() if char.isdigit())
            if low <= len(digits) <= high and not checksums.isbn_valid(digits) and not _double_separator(match.group()):
                return True
    return False


def _double_separator(text: str) -> bool:
    return any(pair in text for pair in ("--", "..", "-.", ".-", "  "))


# --- numbers with check digits -----------------------------------------------------------------------------


def payment_card(probe: Probe) -> bool:
    """14-19 digits, written whole or grouped as cards are printed (4-4-4-4, 4-6-5), standing apart from
    the letters and digits around them, with a network's prefix and length and a valid Luhn digit."""
    text = probe.text
    for match in _DIGIT_RUN.finditer(text):
        parts = _SEPARATOR.split(match.group())
        groups, separators = parts[::2], parts[1::2]
        apart_left = match.start() == 0 or not text[match.start() - 1].isalnum()
        apart_right = match.end() == len(text) or not text[match.end()].isalnum()
        # Every window of consecutive groups that adds up to 14-19 digits and starts and ends at the
        # run's edge or at a space; a window never spans more than 19 groups, so this stays linear.
        for first in range(len(groups)):
            if groups[first][0] not in "23456" or not (apart_left if first == 0 else separators[first - 1] == " "):
                continue  # every card network's prefix begins with 2 to 6
            digits, sizes = "", []
            for last in range(first, len(groups)):
                if last > first + 1 and separators[last - 1] != separators[first]:
                    break  # one card is grouped with one kind of separator
                digits += groups[last]
                sizes.append(len(groups[last]))
                if len(digits) > 19 or (last > first and sizes[-1] > 6):
                    break  # too long for a card, or not grouped as cards are
                closed = apart_right if last == len(groups) - 1 else separators[last] == " "
                if len(digits) >= 14 and closed and _card_grouping(sizes) and checksums.payment_card(digits):
                    return True
    return False


def _card_grouping(sizes: list[int]) -> bool:
    if len(sizes) == 1:
        return True
    return sizes in ([4, 6, 5], [4, 6, 4]) or (len(sizes) >= 3 and set(sizes[:-1]) == {4} and sizes[-1] <= 4)


def iban(probe: Probe) -> bool:
    text = probe.upper
    for match in _IBAN_START.finditer(text):
        length = checksums.IBAN_LENGTHS.get(match.group()[:2])
        if length is None:
            continue
        candidate: list[str] = []
        position = match.start()
        while position < len(text) and len(candidate) < length:
            char = text[position]
            if char.isalnum():
                candidate.append(char)
            elif char != " ":  # printed IBANs are grouped by single spaces
                break
            position += 1
        boundary = position >= len(text) or not text[position].isalnum()
        if boundary and checksums.iban_valid("".join(candidate)):
            return True
    return False


def national_id(probe: Probe) -> bool:
    text = probe.upper
    checks: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], bool]], ...] = (
        (_SSN, lambda m: checksums.us_ssn(m.group(1), m.group(3), m.group(4))),
        (_NINO, lambda m: checksums.uk_nino(m.group(1))),
        (_DNI, lambda m: checksums.spanish_dni(m.group(1), m.group(2))),
        (_FISCAL_CODE, lambda m: checksums.italian_fiscal_code(m.group())),
        (_CPF, lambda m: checksums.brazilian_cpf("".join(m.groups()))),
        (_SIN, lambda m: checksums.luhn_valid(m.group(1) + m.group(3) + m.group(4))),
        (_PERSONNUMMER, lambda m: checksums.swedish_personal_number(m.group(1) + m.group(2))),
        (_AADHAAR, lambda m: checksums.aadhaar("".join(m.groups()))),
        (_CN_ID, lambda m: checksums.chinese_resident_id(m.group())),
        (_NIR, lambda m: checksums.french_nir("".join(m.groups()), m.group(4))),
    )
    return any(check(match) for pattern, check in checks for match in pattern.finditer(text))


_RULES: tuple[tuple[Kind, Callable[[Probe], bool]], ...] = (
    (Kind.PRIVATE_KEY, lambda p: secret_formats.private_key(p.upper, p.tokens)),
    (Kind.CONTROL, lambda p: bool(_CONTROL.search(p.raw))),
    (Kind.JWT, lambda p: secret_formats.jwt(p.pieces)),
    (Kind.URL_CREDENTIALS, lambda p: secret_formats.url_credentials(p.words)),
    (Kind.CREDENTIAL, lambda p: secret_formats.prefixed_credential(p.words)),
    (Kind.CLOUD_KEY, lambda p: secret_formats.cloud_key(p.pieces)),
    (Kind.VENDOR_KEY, lambda p: secret_formats.vendor_key(p.pieces)),
    (Kind.EMAIL, email),
    (Kind.IBAN, iban),
    (Kind.PAYMENT_CARD, payment_card),
    (Kind.NATIONAL_ID, national_id),
    (Kind.PHONE, phone),
    (Kind.SECRET, lambda p: secret_formats.high_entropy(p.tokens)),
)
