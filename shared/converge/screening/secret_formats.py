"""Shapes of secrets: private keys, JWTs, credentials in URLs or behind a name, vendor and cloud keys, and
random strings long enough to be keys.

Every check works on tokens (the value split on whitespace and punctuation, once, in linear time)
and matches a token with `fullmatch` against a pattern that starts with a literal prefix and has no
nested or adjacent overlapping quantifiers, so no pattern can backtrack over its input. Values reach
these checks already capped in length (see converge.screening.limits).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from urllib.parse import parse_qsl, urlsplit

from converge.screening.field_names import compact, vocabulary

CLOUD_KEYS = re.compile(
    "|".join(
        f"(?:{p})"
        for p in (
            r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}",  # AWS access key id
            r"AIza[0-9A-Za-z_-]{35}",  # Google API key
            r"GOCSPX-[0-9A-Za-z_-]{28}",  # Google OAuth client secret
            r"ya29\.[0-9A-Za-z_-]{20,}",  # Google OAuth access token
            r"1//0[0-9A-Za-z_-]{40,}",  # Google OAuth refresh token
            r"[0-9A-Za-z_.-]{3}\dQ~[0-9A-Za-z_~.-]{31,34}",  # Microsoft Entra client secret
            r"LTAI[0-9A-Za-z]{12,20}",  # Alibaba Cloud access key id
        )
    )
)
VENDOR_KEYS = re.compile(
    "|".join(
        f"(?:{p})"
        for p in (
            r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}",  # Stripe secret and restricted keys
            r"whsec_[0-9A-Za-z+/]{20,}",  # Stripe webhook signing secret
            r"gh[pousr]_[0-9A-Za-z]{30,}",  # GitHub tokens
            r"github_pat_[0-9A-Za-z_]{30,}",
            r"glpat-[0-9A-Za-z_-]{20,}",  # GitLab
            r"xox[abposr]-[0-9A-Za-z-]{10,}",  # Slack
            r"xapp-[0-9A-Za-z-]{10,}",
            r"sk-(?:proj-|ant-api\d\d-|ant-|svcacct-|admin-)?[0-9A-Za-z_-]{20,}",  # OpenAI, Anthropic
            r"SG\.[0-9A-Za-z_-]{16,}\.[0-9A-Za-z_-]{16,}",  # SendGrid
            r"key-[0-9a-z]{32}",  # Mailgun
            r"SK[0-9a-fA-F]{32}",  # Twilio API key
            r"npm_[0-9A-Za-z]{36}",
            r"pypi-AgE[0-9A-Za-z_-]{40,}",
            r"hf_[0-9A-Za-z]{30,}",  # Hugging Face
            r"do[opr]_v1_[0-9a-f]{64}",  # DigitalOcean
            r"shp(?:at|ss|ca|pa)_[0-9a-fA-F]{32}",  # Shopify
            r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}",  # Square
            r"EAAA[0-9A-Za-z_-]{60}",
            r"hv[sb]\.[0-9A-Za-z_-]{24,}",  # HashiCorp Vault
            r"ATATT3[0-9A-Za-z_=-]{20,}",  # Atlassian
            r"dp\.(?:pt|st|ct|sa|scim|audit)\.[0-9A-Za-z]{40,}",  # Doppler
            r"dapi[0-9a-f]{32}(?:-\d)?",  # Databricks
            r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}",  # Postman
            r"lin_api_[0-9A-Za-z]{40}",  # Linear
            r"(?:secret_|ntn_)[0-9A-Za-z]{40,}",  # Notion
            r"gl(?:sa|c)_[0-9A-Za-z_+/]{32,}",  # Grafana
            r"sntry[su]_[0-9A-Za-z_+/]{40,}",  # Sentry
            r"NRAK-[0-9A-Z]{27}",  # New Relic
            r"dt0c01\.[0-9A-Z]{24}\.[0-9A-Z]{64}",  # Dynatrace
            r"AGE-SECRET-KEY-1[0-9A-Z]{58}",  # age
            r"\d{8,10}:AA[0-9A-Za-z_-]{33}",  # Telegram bot
            r"[MNO][0-9A-Za-z_-]{23,25}\.[0-9A-Za-z_-]{6}\.[0-9A-Za-z_-]{27,38}",  # Discord bot
            r"[ps]k\.eyJ[0-9A-Za-z_-]{20,}\.[0-9A-Za-z_-]{20,}",  # Mapbox
            r"rubygems_[0-9a-f]{48}",
            r"HRKU-[0-9A-Za-z_-]{60}",  # Heroku
            r"pat[0-9A-Za-z]{14}\.[0-9a-f]{64}",  # Airtable
        )
    )
)
"""One alternation per family, each alternative starting with its own literal prefix: one `fullmatch`
per token, linear in the token."""

_JWT = re.compile(r"eyJ[0-9A-Za-z_-]{2,}\.[0-9A-Za-z_-]{2,}(?:\.[0-9A-Za-z_-]*){1,3}")
_DER_KEY = re.compile(r"MII[0-9A-Za-z+/]{61,}={0,2}")
_PEM_MARKERS = ("PRIVATE KEY", "PUTTY-USER-KEY-FILE", "BEGIN OPENSSH", "BEGIN PGP PRIVATE")

_STRONG_NAMES = vocabulary(
    "password passwd pwd passphrase secret clientsecret apikey apitoken apisecret accesstoken "
    "refreshtoken authtoken sessiontoken idtoken privatekey secretkey accesskey accountkey "
    "sharedaccesskey credential credentials xapikey"
)
"""A value written `name=…` or `name: …` under one of these names is a credential whatever follows."""
_WEAK_NAMES = vocabulary("token auth authorization sig signature pass pin otp cookie sessionid session_id bearer")
"""These names also mean other things, so the value must itself look like a credential (`bearer:8a7b…` is one,
`bearer:bonds` is not)."""
_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "negotiate"})
_URL_STRONG_PARAMS = _STRONG_NAMES | {
    "xamzsignature",
    "xamzcredential",
    "xamzsecuritytoken",
    "xgoogsignature",
    "xgoogcredential",
}
_URL_WEAK_PARAMS = frozenset({"token", "key", "sig", "signature", "auth", "sessionid"})
_WEBHOOKS = re.compile(
    "|".join(
        f"(?:{p})"
        for p in (
            r"hooks\.slack\.com/(?:services|workflows|triggers)/T[0-9A-Z]+/[0-9A-Z]+/[0-9A-Za-z/]{8,}",  # Slack
            r"(?:ptb\.|canary\.)?discord(?:app)?\.com/api/(?:v\d+/)?webhooks/\d+/[0-9A-Za-z_-]{20,}",  # Discord
            r"[0-9A-Za-z-]+\.webhook\.office\.com/webhookb2/[0-9A-Za-z_./@-]{20,}",  # Microsoft Teams
            r"outlook\.office(?:365)?\.com/webhook/[0-9A-Za-z_./@-]{20,}",
            r"api\.telegram\.org/bot\d{8,10}:[0-9A-Za-z_-]{30,}",  # Telegram
        )
    )
)
"""Webhook URLs whose path is the secret (whoever holds one may post as the integration): host and path, after
the scheme, matched from a literal start."""
_URL_PIECES = re.compile(r"[/#&;+]")

_VOWELS = frozenset("aeiouyAEIOUY")
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_PARTS = re.compile(r"[-_./:+]")
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_BASE64ISH = re.compile(r"[0-9A-Za-z+/_-]+={0,2}")
_HEX = re.compile(r"[0-9A-Fa-f]+")
_OBJECT_PREFIX = re.compile(r"([a-z]{1,12})[_-]")
_SECRET_PREFIXES = frozenset({"key", "secret", "token", "pass", "pwd", "auth", "sk", "pk", "rk", "api_key"})
_DIGEST_PREFIXES = ("sha1:", "sha256:", "sha384:", "sha512:", "md5:")
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_KSUID_EPOCH = 1_400_000_000
_PLAUSIBLE_SECONDS = (1_400_000_000, 2_400_000_000)  # 2014 to 2046: ids minted by running systems


def private_key(upper: str, tokens: list[str]) -> bool:
    return any(marker in upper for marker in _PEM_MARKERS) or any(_DER_KEY.fullmatch(t) for t in tokens)


def jwt(tokens: list[str]) -> bool:
    return any(token.startswith("eyJ") and _JWT.fullmatch(token) for token in tokens)


def url_credentials(words: list[str]) -> bool:
    """`scheme://user:password@host`, a URL whose query, path or fragment carries a token, key or signature
    (`?api_key=…`, `/cb/token=…`, `#access_token=…`), or a webhook URL whose path is itself the secret."""
    for word in words:
        if "://" not in word:
            continue
        try:
            parts = urlsplit(word)
            password = parts.password
        except ValueError:
            continue
        if password or (parts.username and ":" in parts.netloc.rsplit("@", 1)[0]):
            return True
        for name, value in parse_qsl(parts.query, keep_blank_values=False):
            key = compact(name)
            if key in _URL_STRONG_PARAMS or (key in _URL_WEAK_PARAMS and _credential_like(value)):
                return True
        if _WEBHOOKS.match(word.partition("://")[2]):
            return True
        # A name and its value in the path or the fragment (`/cb/token=…`, `#access_token=…`), as in a query
        assigned = [piece for piece in _URL_PIECES.split(f"{parts.path}#{parts.fragment}") if "=" in piece]
        if assigned and prefixed_credential(assigned):
            return True
    return False


def prefixed_credential(words: list[str]) -> bool:
    """A secret behind a name or an auth scheme: `password=…`, `api_key: …`, `Bearer …`, `Basic …`."""
    for index, word in enumerate(words):
        following = words[index + 1] if index + 1 < len(words) else ""
        lowered = word.lower()
        if lowered in _SCHEMES:
            if _credential_like(following, scheme=lowered):
                return True
            continue
        name, separator, value = _split_assignment(word)
        if not separator:
            continue
        if not value:  # `password: hunter2` or `Authorization: Bearer …`
            value = following
            if value.lower() in _SCHEMES:
                return True
        key = compact(name)
        if key.startswith("x") and key[1:] in _STRONG_NAMES:
            key = key[1:]
        if key in _STRONG_NAMES and len(value) >= 3:
            return True
        if key in _WEAK_NAMES and _credential_like(value):
            return True
    return False


def _split_assignment(word: str) -> tuple[str, str, str]:
    cut = min((i for i in (word.find("="), word.find(":")) if i > 0), default=-1)
    if cut < 0:
        return word, "", ""
    return word[:cut], word[cut], word[cut + 1 :].lstrip("=:\"'")


def _credential_like(value: str, scheme: str = "") -> bool:
    """Long enough and mixed enough to be a token rather than a word ("bearer bonds", "basic monthly")."""
    if scheme == "basic":
        return len(value) >= 8 and bool(_BASE64ISH.fullmatch(value)) and any(c.isdigit() or c.isupper() for c in value)
    if len(value) < 8 or not _BASE64ISH.fullmatch(value.rstrip(".~")):
        return False
    return any(c.isdigit() for c in value) or (any(c.isupper() for c in value) and any(c.islower() for c in value))


def cloud_key(tokens: list[str]) -> bool:
    return any(CLOUD_KEYS.fullmatch(token) for token in tokens)


def vendor_key(tokens: list[str]) -> bool:
    # `sk-` also begins product codes (`sk-ii-essence-serum`): there the rest must be mixed like a key.
    return any(VENDOR_KEYS.fullmatch(t) and (not t.startswith("sk-") or _mixed(t[3:])) for t in tokens)


def high_entropy(tokens: list[str]) -> bool:
    """A random string long enough to be a key: 32+ hex digits, or 24+ mixed base64 characters that read
    neither as words nor as a known time-ordered id (KSUID, ULID) nor as a prefixed object id."""
    return any(_random_secret(token) for token in tokens if len(token) >= 24)


def _random_secret(token: str) -> bool:
    if token.lower().startswith(_DIGEST_PREFIXES):
        return False  # `sha256:9f86…`: a content digest, named as one
    if _HEX.fullmatch(token):
        return len(token) >= 32
    if not _BASE64ISH.fullmatch(token):
        return False
    body = token.rstrip("=")
    prefix = _OBJECT_PREFIX.match(body)
    if prefix and prefix.group(1) not in _SECRET_PREFIXES:
        rest = body[prefix.end() :]
        if len(rest) <= 32 or _HEX.fullmatch(rest):
            # an object id behind its type: `cus_NffrFeUfNV2Hib`, `evt_1NG8Du2eZvKYlo2CUI79vXWy`, `api-5d0c…`
            return False
    if _ksuid(body) or _UUID.fullmatch(body):
        return False
    classes = _classes(body)
    if classes < 2 or (classes == 2 and (len(body) < 32 or not any(c.isdigit() for c in body))):
        return False
    if _structured(body) or _wordiness(body) >= 0.5:
        return False  # `tenant_eu_west_1_order_000987`, `Photos/UserUploads/ImageFinal2024`: parts and words
    return _entropy(body) >= 3.5


def _structured(token: str) -> bool:
    """Built of parts a person assembled: every separated part short, all letters or all digits. A random
    base64 string of 24+ characters splits (at its rare `/`, `+`, `-`, `_`) into long mixed parts."""
    return all(len(part) <= 8 or part.isalpha() or part.isdigit() for part in _PARTS.split(token))


def _ksuid(token: str) -> bool:
    """A KSUID: 27 base62 characters encoding 160 bits whose first 32 are seconds since 2014-05-13."""
    if len(token) != 27 or any(c not in _BASE62 for c in token):
        return False
    number = 0
    for char in token:
        number = number * 62 + _BASE62.index(char)
    if number >= 1 << 160:
        return False
    seconds = (number >> 128) + _KSUID_EPOCH
    return _PLAUSIBLE_SECONDS[0] <= seconds <= _PLAUSIBLE_SECONDS[1]


def _classes(token: str) -> int:
    return sum((any(c.islower() for c in token), any(c.isupper() for c in token), any(c.isdigit() for c in token)))


def _mixed(token: str) -> bool:
    return _classes(token) == 3 or (len(token) >= 32 and _classes(token) == 2)


def _wordiness(token: str) -> float:
    """The share of characters in pronounceable words of four letters or more (`uploads`, `Final`,
    `Orders`), split as camel case is: random base64 of 24 characters scores 0.5 or more one time in 170,
    of 64 characters never in 5,000 samples; paths and product names score 0.6 and above."""
    return sum(len(word) for word in _WORD.findall(token) if _pronounceable(word)) / len(token)


def _pronounceable(word: str) -> bool:
    if len(word) < 4 or sum(char in _VOWELS for char in word) * 4 < len(word):
        return False
    consonants = 0
    for char in word:
        consonants = 0 if char in _VOWELS else consonants + 1
        if consonants > 3:
            return False
    return True


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
