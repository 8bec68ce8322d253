"""Check digits of the numbers the value heuristics look for: payment cards, IBANs, ISBNs, national ids.

A check digit is what lets a heuristic tell a card number or an IBAN from an ordinary id of the same
shape: a random digit string passes Luhn one time in ten and mod 97 one time in 97, so each check
below is combined with a structural rule (issuer prefix, country length, date fields) before a value
is refused. Every function takes a short, already-extracted candidate and runs in time linear in it.
"""

from __future__ import annotations

from datetime import date

IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
    "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip
"""IBAN length per country (ISO 13616 registry): a candidate must have exactly its country's length."""


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check used by payment cards and several national ids."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


CARD_NETWORKS = (
    # (lowest prefix, highest prefix, lengths issued)
    ("4", "4", (16,)),  # Visa
    ("51", "55", (16,)),
    ("2221", "2720", (16,)),  # Mastercard
    ("34", "34", (15,)),
    ("37", "37", (15,)),  # American Express
    ("300", "305", (14, 16)),
    ("36", "36", (14, 16)),
    ("38", "39", (14, 16)),  # Diners Club
    ("6011", "6011", (16, 19)),
    ("644", "649", (16, 19)),
    ("65", "65", (16, 19)),  # Discover
    ("3528", "3589", (16, 19)),  # JCB
    ("62", "62", (16, 17, 18, 19)),  # UnionPay
    ("50", "50", (16, 19)),
    ("56", "58", (16, 19)),
    ("67", "67", (16, 19)),  # Maestro
)
"""Issuer prefixes and the lengths each network issues, so that a 19-digit snowflake id that happens
to begin with 2 (Mastercard's 2-series, 16 digits only) is not taken for a card."""


def payment_card(digits: str) -> bool:
    """A card number: a network's prefix, a length it issues, and a valid Luhn digit. 13-digit numbers
    (EAN-13 barcodes, ISBN-13, epoch milliseconds) are never taken for cards."""
    if not 14 <= len(digits) <= 19:
        return False
    issued = any(len(digits) in lengths and low <= digits[: len(low)] <= high for low, high, lengths in CARD_NETWORKS)
    return issued and luhn_valid(digits)


def iban_valid(candidate: str) -> bool:
    """ISO 13616: the country's length, then mod 97 of the rearranged number is 1."""
    if IBAN_LENGTHS.get(candidate[:2]) != len(candidate) or not candidate[2:4].isdigit():
        return False
    rearranged = candidate[4:] + candidate[:4]
    remainder = 0
    for char in rearranged:
        if char.isdigit():
            remainder = (remainder * 10 + ord(char) - 48) % 97
        elif "A" <= char <= "Z":
            remainder = (remainder * 100 + ord(char) - 55) % 97
        else:
            return False
    return remainder == 1


def isbn_valid(digits: str) -> bool:
    """ISBN-10 (mod 11, X for 10) or ISBN-13 (EAN, 978/979 prefix): book numbers are not phone numbers."""
    if len(digits) == 10:
        if not digits[:9].isdigit() or not (digits[9].isdigit() or digits[9] in "Xx"):
            return False
        total = sum((10 - i) * int(d) for i, d in enumerate(digits[:9]))
        total += 10 if digits[9] in "Xx" else int(digits[9])
        return total % 11 == 0
    if len(digits) == 13 and digits.isdigit() and digits.startswith(("978", "979")):
        total = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(digits))
        return total % 10 == 0
    return False


def plausible_date(year: int, month: int, day: int) -> bool:
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


# --- national identity numbers -------------------------------------------------------------------------------


def us_ssn(area: str, group: str, serial: str) -> bool:
    """US Social Security number in its written form AAA-GG-SSSS (the SSA's never-issued blocks excluded)."""
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


_NINO_FIRST = set("ABCEGHJKLMNOPRSTWXYZ")
_NINO_SECOND = set("ABCEGHJKLMNPRSTWXYZ")
_NINO_EXCLUDED = {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}


def uk_nino(prefix: str) -> bool:
    """UK National Insurance number prefix rules (two letters; D, F, I, Q, U, V and some pairs never used)."""
    return prefix[0] in _NINO_FIRST and prefix[1] in _NINO_SECOND and prefix not in _NINO_EXCLUDED


_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def spanish_dni(number: str, letter: str) -> bool:
    """Spanish DNI (8 digits) or NIE (X/Y/Z and 7 digits): the letter is the number mod 23."""
    if number[0] in "XYZ":
        number = str("XYZ".index(number[0])) + number[1:]
    return _DNI_LETTERS[int(number) % 23] == letter


_CF_ODD = {
    **dict(zip("0123456789", (1, 0, 5, 7, 9, 13, 15, 17, 19, 21), strict=True)),
    **dict(
        zip(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            (1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24, 23),
            strict=True,
        )
    ),
}


def italian_fiscal_code(code: str) -> bool:
    """Italian codice fiscale: 15 characters and a check letter from the odd/even position tables."""
    total = 0
    for position, char in enumerate(code[:15]):
        if position % 2 == 0:
            total += _CF_ODD[char]
        else:
            total += int(char) if char.isdigit() else ord(char) - 65
    return chr(65 + total % 26) == code[15]


def brazilian_cpf(digits: str) -> bool:
    """Brazilian CPF: two mod-11 check digits over nine."""
    if len(set(digits)) == 1:
        return False
    for length in (9, 10):
        total = sum(int(d) * (length + 1 - i) for i, d in enumerate(digits[:length]))
        check = total * 10 % 11 % 10
        if check != int(digits[length]):
            return False
    return True


def swedish_personal_number(digits: str) -> bool:
    """Swedish personnummer YYMMDD-NNNC: a real date (day + 60 for a coordination number) and Luhn."""
    month, day = int(digits[2:4]), int(digits[4:6])
    day = day - 60 if day > 60 else day
    return plausible_date(2000, month, day) and luhn_valid(digits)


_VERHOEFF_D = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
    [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
    [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
    [4, 0, 1, 2, 3, 9, 5, 6, 7, 8],
    [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
    [6, 5, 9, 8, 7, 1, 0, 4, 3, 2],
    [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
    [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
]
_VERHOEFF_P = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    [1, 5, 7, 6, 2, 8, 3, 0, 9, 4],
    [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
    [8, 9, 1, 6, 0, 4, 3, 5, 2, 7],
    [9, 4, 5, 3, 1, 2, 6, 8, 7, 0],
    [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
    [2, 7, 9, 3, 8, 0, 6, 4, 1, 5],
    [7, 0, 4, 6, 9, 1, 3, 2, 5, 8],
]


def aadhaar(digits: str) -> bool:
    """Indian Aadhaar: 12 digits, not starting with 0 or 1, Verhoeff check digit."""
    if digits[0] in "01":
        return False
    check = 0
    for position, char in enumerate(reversed(digits)):
        check = _VERHOEFF_D[check][_VERHOEFF_P[position % 8][int(char)]]
    return check == 0


_CN_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def chinese_resident_id(code: str) -> bool:
    """Chinese resident identity number: region, a real birth date, sequence, ISO 7064 MOD 11-2 check."""
    if not plausible_date(int(code[6:10]), int(code[10:12]), int(code[12:14])):
        return False
    total = sum(int(d) * w for d, w in zip(code[:17], _CN_WEIGHTS, strict=True))
    return "10X98765432"[total % 11] == code[17].upper()


def french_nir(digits: str, department: str) -> bool:
    """French NIR (numéro de sécurité sociale): sex, year, month, place, order, and a mod-97 key."""
    body = digits[:13]
    if department in ("2A", "2B"):  # Corsica: the key is computed with 19 or 18 in place of the letters
        body = body[:5] + ("19" if department == "2A" else "18") + body[7:]
    return 97 - int(body) % 97 == int(digits[13:15])
