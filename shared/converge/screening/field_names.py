"""Field names that say a field would hold PII or a secret (`pwd`, `card_no`, `national_id`, `userEmail`).

A name is split into words (snake, kebab and camel case), then matched word by word, so `token`
is a secret's name while `tokenizer_version` is not, and `author_id` is not `auth`. A last word
that describes the value instead of holding it (`_id`, `_count`, `_verified`, `_at`, `_version`)
makes the name harmless: `password_reset_id` and `email_verified` carry no password and no address.
The rules were tuned on the corpus in tests/unit/test_heuristics_corpus.py, which measures them.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass


def vocabulary(words: str) -> frozenset[str]:
    """A set of words written as one space-separated string (the lists are long and only words)."""
    return frozenset(words.split())


SECRET_WORDS = vocabulary(
    "password passwords passwd pwd passphrase secret secrets credential credentials cvc cvv cvc2 cvv2 csc "
    "otp totp hotp mfa pin jwt cookie cookies authorization auth authn authz bearer apikey privatekey "
    "signature pw pswd psw pword pwrd passwrd creds"
)
PII_WORDS = vocabulary(
    "email emails phone phones telephone mobile msisdn fax address addresses street postcode zipcode dob "
    "birthdate birthday salary iban ssn nino nin passport surname firstname lastname fullname tel telno eml "
    "cellphone mobno phn bday"
)
COMPOUNDS = frozenset(
    tuple(words.split())
    for words in (
        "api key", "access key", "secret key", "private key", "signing key", "encryption key", "license key",
        "licence key", "master key", "client secret", "access token", "refresh token", "id token", "auth token",
        "session token", "session id", "session key", "card number", "card no", "card num", "card pan",
        "card digits", "credit card", "debit card", "card expiry", "card exp", "cc number", "cc num", "cc no",
        "security code", "security answer", "recovery code", "backup code", "national id", "national number",
        "tax id", "tax number", "social security", "birth date", "first name", "last name", "full name",
        "given name", "family name", "middle name", "maiden name", "home address", "street address",
        "email address", "mail address", "e mail", "phone number", "ip address", "driver license",
        "drivers license", "driving licence", "license number", "licence number", "account number",
        "routing number", "sort code", "bank account", "passport number", "date of birth",
        # abbreviated: `mob_no`, `ph_num`, `mail_addr`, `priv_key` (a word alone is too ambiguous: a spreadsheet's
        # cell, a game's mob, pH, a mail queue)
        "mob no", "mob num", "mob number", "mob phone", "cell no", "cell num", "cell number", "ph no", "ph num",
        "ph number", "mail addr", "home addr", "street addr", "billing addr", "shipping addr", "postal addr",
        "ip addr", "user mail", "contact mail", "customer mail", "recipient mail", "priv key", "pvt key",
        "hmac key", "sec key",
    )
)  # fmt: skip
ALWAYS = frozenset(
    {("national", "id"), ("tax", "id"), ("session", "id")}
    | {(part, "name") for part in ("first", "last", "full", "given", "family", "middle", "maiden")}
)
"""Compounds that name the sensitive value itself even though they end in a meta word (`_id`, `_name`)."""
WHOLE_NAMES = {"mail": "personal data", "mob": "personal data", "addr": "personal data"}
"""Abbreviations that name contact data only as the whole name (`mail`, `addr`): in `mail_queue` or
`addr_family` they mean something else."""
TOKEN_WORDS = vocabulary("token tokens tok toks tkn tkns")
"""A secret's name unless a quantity word says it counts them (`max_tokens`, `tok_limit`)."""
META_WORDS = vocabulary(
    "id ids ref refs uuid count counts total type kind status state version template verified enabled at "
    "on policy provider method mode scheme name arn length format rule rules sent changed updated "
    "attempts required"
)
"""A last word that says the field describes the named thing rather than holding it."""
QUANTITY_WORDS = vocabulary("count counts limit limits budget usage used total max min num length per cost rate")
SUBSTRINGS = (
    "password", "passwd", "pwd", "passphrase", "credential", "apikey", "apitok", "apisecret", "accesstok",
    "refreshtoken", "clientsecret", "privatekey", "secretkey", "creditcard", "cardnumber", "socialsecurity",
    "dateofbirth", "birthdate", "nationalid", "sessiontoken", "emailaddr", "phonenumber", "pswd", "mailaddr",
    "telnum", "phonenum",
)  # fmt: skip
"""Parts unambiguous enough to find inside a name written as one word (`userpassword`, `clientsecret`)."""

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


@dataclass(frozen=True)
class SensitiveName:
    term: str
    category: str  # "secret" or "personal data"

    def describe(self) -> str:
        return f"suggests {self.category} ({self.term!r})"


def words(name: str) -> list[str]:
    """`userEmailAddress`, `user_email-address` → ['user', 'email', 'address']."""
    return [word.lower() for word in _WORD.findall(name[:128])]


def compact(name: str) -> str:
    """Lower case without separators: how a name is compared when it is one word (`X-Api-Key` → `xapikey`)."""
    return "".join(char for char in name.lower() if char.isalnum())


def sensitive_name(name: str) -> SensitiveName | None:
    """What makes a field name look like PII or a secret, or None for an ordinary name."""
    parts = words(name)
    if not parts:
        return None
    pairs = set(itertools.pairwise(parts))
    for compound in ALWAYS & pairs:
        return SensitiveName("_".join(compound), "a secret" if compound == ("session", "id") else "personal data")
    if len(parts) > 1 and parts[-1] in META_WORDS:
        return None
    for word in parts:
        if word in SECRET_WORDS:
            return SensitiveName(word, "a secret")
        if word in PII_WORDS:
            return SensitiveName(word, "personal data")
    if len(parts) == 1 and parts[0] in WHOLE_NAMES:
        return SensitiveName(parts[0], WHOLE_NAMES[parts[0]])
    if TOKEN_WORDS & set(parts) and not QUANTITY_WORDS & set(parts):
        return SensitiveName("token", "a secret")
    if parts[-1] in ("pass", "sig"):  # `db_pass`, `webhook_sig`; `pass_id` and `boarding_pass_count` are not
        return SensitiveName("_".join(parts[-2:]), "a secret")
    for pair in COMPOUNDS & (pairs | set(zip(parts, parts[1:], parts[2:], strict=False))):
        return SensitiveName("_".join(pair), "a secret" if pair[-1] in ("key", "secret", "token") else "personal data")
    joined = compact(name)
    for part in SUBSTRINGS:
        if part in joined:
            return SensitiveName(part, "a secret")
    return None
