"""The corpus the value and field-name heuristics are measured on: true cases (PII and secrets, each with
the kind it must be refused as) and false cases (ordinary identifiers, keys, numbers and words that must
pass). Test numbers are the networks' and registries' published test values or computed to pass their
check digits; none belongs to anyone.

Two probe sets stand apart (and are counted in the sets above too): the secrets an `ExternalId` field admits
(its alphabet holds `:`, `/`, `#` and `=`, so a key can sit behind a scheme-like prefix, in a webhook URL, or
in a URL's path or fragment), and abbreviated names of secret or contact fields. Each was once accepted; the
tests measure the heuristics' recall on them apart from the rest.
"""

from __future__ import annotations

TRUE_VALUES: dict[str, list[str]] = {
    "email": [
        "alice@example.com",
        "Bob.Smith+news@mail.example.co.uk",
        "ops-team@sub.example.org",
        "jo_o'neil@example.ie",
        "ALICE@EXAMPLE.COM",
        "user123@example.museum",
        "first.last@xn--bcher-kva.example",
        "contact: alice@example.com",
        "mailto:alice@example.com",
        "u-1001:alice@example.com",
        "alice\uff20example.com",  # fullwidth commercial at
        "alice\ufe6bexample.com",  # small commercial at
        "alice@\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com",  # fullwidth letters
        "\u0430lice@ex\u0430mple.com",  # Cyrillic a
        "ali\u200bce@exa\u200bmple.com",  # zero-width spaces
        "user.name@\u4f8b\u3048.jp",
        "alice (at) example (dot) com",
        "alice [at] example [dot] com",
        "alice at example dot com",
        "alice AT example DOT com",
        "alice{at}example{dot}com",
        "alice<at>example.com",
        "alice_at_example_dot_com",
        "alice%40example.com",
        "alice&#64;example.com",
        "alice@example dot com",
        "alice(@)example.com",
    ],
    "phone": [
        "+44 20 7946 0958",
        "+1-202-555-0143",
        "+1 (202) 555-0143",
        "+41795551234",
        "+33 6 12 34 56 78",
        "+49 (0)30 1234567",
        "+61 2 9876 5432",
        "+81-3-1234-5678",
        "\uff0b44 20 7946 0958",  # fullwidth plus
        "call +44 20 7946 0958",
        "0044 20 7946 0958",
        "(202) 555-0143",
        "202-555-0143",
        "202.555.0143",
        "202 555 0143",
        "tel:+12025550143",
        "tel:020-7946-0958",
        "TEL:+49-30-1234567",
        "020 7946 0958",
        "07700 900123",
        "06 12 34 56 78",
        "030-1234567",
    ],
    "payment_card": [
        "4111111111111111",
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "5500 0055 5555 5559",
        "5555555555554444",
        "5105105105105100",
        "2223003122003222",
        "378282246310005",
        "3782 822463 10005",
        "6011111111111117",
        "6011000990139424",
        "3530111333300000",
        "3566002020360505",
        "30569309025904",
        "6200000000000005",
        "4000056655665556",
        "card 4242 4242 4242 4242",
        "order-4242424242424242",
    ],
    "iban": [
        "DE89370400440532013000",
        "DE89 3704 0044 0532 0130 00",
        "de89370400440532013000",
        "GB82WEST12345698765432",
        "GB82 WEST 1234 5698 7654 32",
        "FR1420041010050500013M02606",
        "NL91ABNA0417164300",
        "CH9300762011623852957",
        "ES9121000418450200051332",
        "IT60X0542811101000000123456",
        "BE68539007547034",
        "IBAN: NO9386011117947",
        "AT611904300234573201",
        "PL61109010140000071219812874",
        "SE4550000000058398257466",
        "IE29AIBK93115212345678",
    ],
    "national_id": [
        "078-05-1120",  # US SSN
        "219-09-9999",
        "SSN 536 22 5432",
        "AB123456C",  # UK National Insurance number
        "AB 12 34 56 C",
        "JG103759A",
        "12345678Z",  # Spanish DNI
        "X1234567L",  # Spanish NIE
        "RSSMRA85T10A562S",  # Italian codice fiscale
        "111.444.777-35",  # Brazilian CPF
        "046 454 286",  # Canadian SIN
        "130-456-288",
        "811218-9876",  # Swedish personnummer
        "19900101-1239",
        "2345 6789 0124",  # Indian Aadhaar
        "11010519491231002X",  # Chinese resident id
        "1 85 05 78 006 084 91",  # French NIR
        "269029934173285",
    ],
    "private_key": [
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0BAQEFAASC -----END PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "-----BEGIN EC PRIVATE KEY-----",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        "PuTTY-User-Key-File-3: ssh-ed25519",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKjMzEfYyjiWA4R4",
    ],
    "jwt": [
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.",
        "eyJraWQiOiIxIn0.eyJpc3MiOiJodHRwczovL2V4YW1wbGUuY29tIn0.c2lnbmF0dXJl",
        "Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1LTEwMDEifQ.c2lnbmF0dXJlLWJ5dGVz",
        "token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.sig",
        "eyJhbGciOiJSU0EtT0FFUCIsImVuYyI6IkEyNTZHQ00ifQ.OKOawDo13gRp2ojaHV7LFpZcgV7T6DVZ.48V1_ALb6US04U3b.5eym8TW_c8SuK0ltJ3rpYIzOeDQz7TALvtu6UG9oMo4vpzs9tX_EFShS8iB7j6jiSdiwkIr3ajwQzaBtQD_A.XFBoMYUZodetZdvTiFvSkQ",
    ],
    "url_credentials": [
        "https://alice:s3cr3t@example.com/path",
        "postgres://app:hunter2@db.internal:5432/orders",
        "redis://:p4ssw0rd@cache:6379/0",
        "ftp://user:pass@ftp.example.com",
        "mongodb+srv://admin:Pa55w0rd@cluster0.example.net/db",
        "amqp://guest:guest@rabbit:5672/",
        "https://example.com/callback?access_token=ya29abcDEF123",
        "https://bucket.s3.amazonaws.com/key?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc123def",
        "https://api.example.com/v1/orders?api_key=9f8e7d6c5b4a",
        "wss://stream.example.com/socket?token=abc123def456",
        "https://hooks.example.com/in?sig=8a7b6c5d4e3f",
        "https://storage.googleapis.com/b/o?X-Goog-Signature=abcd1234ef",
        "https://maps.example.com/api/js?key=AbCdEf123456GhIj",
    ],
    "credential": [
        "password=hunter2",
        "PASSWORD=letmein",
        "pwd:Tr0ub4dor&3",
        "passphrase=open sesame",
        "api_key=AbC123xyz789",
        "apiKey: 9f8e7d6c5b4a3210",
        "x-api-key: 7d3f9a2b1c4e5f60",
        "client_secret=Zm9vYmFyYmF6cXV4",
        "secret: correct-horse-battery-staple",
        "access_token=0a1b2c3d4e5f6a7b",
        "AccountKey=abc123def456ghi789",
        "token: 9f8e7d6c5b4a",
        "session_id=5f2b9c7e8d1a4b3c",
        "Bearer 8a7b6c5d4e3f2a1b0c9d",
        "bearer abcDEF123ghiJKL456",
        "Authorization: Bearer abc.def.ghi",
        "Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l",
        "Basic dXNlcjpwYXNzd29yZA==",
        "token abcdef0123456789ghij",
    ],
    "cloud_key": [
        "AKIAIOSFODNN7EXAMPLE",
        "ASIAY34FZKBOKMUTVV7A",
        "aws_access_key_id AKIA2OGYBAH6VNFQXT5Q",
        "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
        "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",
        "ya29.a0AfH6SMBx3kz9QwErTyUiOpAsDfGhJkLzXcVbNm",
        "1//0gLr2Xv3Qw9eRtYuIoPaSdFgHjKlZxCvBnM1234567890abcdef",
        "LTAI5tQ8Z9xYwVuTsRqPoNmL",
        "Abc7Q~de_fGhIjKlMnOpQrStUvWxYz0123456789",
    ],
    "vendor_key": [
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "rk_test_51H8xYzAbCdEfGhIjKlMn",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "ghp_1234567890abcdefABCDEF1234567890abcd",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV",
        "glpat-9aB3cD5eF7gH1iJ2kL4m",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxp-123456789012-123456789012-123456789012-0123456789abcdef",
        "sk-proj-Ab3dEf5GhIj7KlMn9OpQr1StUv",
        "sk-ant-api03-AbCdEf123456GhIjKl789012MnOpQr",
        "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",
        "key-3ax6xnjp29jd6fds4gc373sgvjxteol0",
        "SK0123456789abcdef0123456789abcdef",
        "npm_AbCdEf0123456789GhIjKl0123456789MnOp",
        "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAACKlsz",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "shpat_0123456789abcdef0123456789abcdef",
        "sq0atp-AbCdEf0123456789GhIjKl",
        "hvs.CAESIJlU9N0vJ1B2c3D4e5F6g7H8i9J0",
        "dapi0123456789abcdef0123456789abcdef",
        "AGE-SECRET-KEY-1" + "QYQSZQGP" * 7 + "QY",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
    ],
    "secret": [
        "a8f5f167f44f4964e6c998dee827110c",
        "3c6e0b8a9c15224a8228b9a98ca1531d3c6e0b8a",
        "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08",
        "kT3b9XqZ2mN8vR4pL6sY1wC5dF7gH0jK/uE+aQoI",
        "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
        "Qm9Gx7pLr2VtYw8ZkN3cHd5sJ1aF0eUi",
        "7Kp2Xq9LmZ4vB8nR1tY6wS3dF5gH0jC2",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzK8qA2mT5n",
        "x7Gp_2LqR9vZ-kT4mW8sY1nB6cF3hJ0dE5",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg==",
        "ZmFrZS1zZWNyZXQtdmFsdWUtMTIzNDU2Nzg5MA",
        "r8Tq2Wz5Yx1Vb7Nm4Kj9Hg3Fd6Sa0Lp",
        "token-bucket 4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99",
    ],
}

EXTERNAL_ID_VALUES: dict[str, list[str]] = {
    # a key behind a scheme-like prefix: one token to the splitter, since `:` joins an ExternalId's parts
    "vendor_key": [
        "key:sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "slack:xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "stripe:rk_live_51H8xYzAbCdEfGhIjKlMn",
        "openai:sk-proj-Ab3dEf5GhIj7KlMn9OpQr1StUv",
        "telegram:123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
        "vault#hvs.CAESIJlU9N0vJ1B2c3D4e5F6g7H8i9J0",
        "https://example.com/hooks/sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "https://example.com/in/whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/events",
    ],
    "cloud_key": [
        "aws:AKIAIOSFODNN7EXAMPLE",
        "gcp:AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
        "https://maps.example.com/js/AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    ],
    "jwt": [
        "jwt:eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "https://example.com/session/eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1LTEwMDEifQ.c2lnbmF0dXJlLWJ5dGVz",
    ],
    # a webhook URL is itself the secret (whoever holds it may post), or carries one in its path or fragment
    "url_credentials": [
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "https://hooks.slack.com/services/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",
        "https://hooks.slack.com/workflows/T024BE7LD/A01AB2CDEFG/412345678901234567/q1w2e3r4t5y6u7i8o9p0AbCd",
        "https://discord.com/api/webhooks/123456789012345678/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcdefghijKLMN",
        "https://discordapp.com/api/webhooks/123456789012345678/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "https://contoso.webhook.office.com/webhookb2/8f3c2a1e-1b2c-4d5e-8f9a-0b1c2d3e4f5a/IncomingWebhook/0123456789abcdef0123456789abcdef/8f3c2a1e-1b2c-4d5e-8f9a-0b1c2d3e4f5a",
        "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0/sendMessage",
        "https://example.com/callback#access_token=ya29abcDEF123",
        "https://example.com/cb#state=42+token=abc123def456ghi",
        "https://example.com/cb/token=abc123def456ghi",
        "https://example.com/api/password=hunter22/export",
    ],
    # a secret behind a scheme-like name (refused as a credential before its key format is looked at)
    "credential": [
        "bearer:8a7b6c5d4e3f2a1b0c9d",
        "bearer:sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "Bearer:ghp_1234567890abcdefABCDEF1234567890abcd",
        "auth:glpat-9aB3cD5eF7gH1iJ2kL4m",
        "Bearer=abcDEF123ghiJKL456",
    ],
}
"""Secrets an `ExternalId` admits, by the kind each must be refused as."""

FALSE_VALUES: list[str] = [
    # ordinary identifiers
    "u-1001", "p-2001", "ad-3001", "cv-4001", "b-5001", "up-6001", "user_42", "order:2024:000123",
    "tenant-eu-west-1", "acct.00042", "job-7f3a", "reset-7f3a", "benefit-2026-11-0042", "op-good",
    "api-5d0c4d3d0f6a1b2c3d4e5f60718293a4b5c6d7e8", "550e8400-e29b-41d4-a716-446655440000",
    "urn:uuid:550e8400-e29b-41d4-a716-446655440000", "507f1f77bcf86cd799439011", "3f2a1b4",
    "V1StGXR8_Z5jdHi6B-myT", "dQw4w9WgXcQ", "deadbeef", "1Z999AA10123456784", "SKU-BLU-XL-042",
    "tenant_eu_west_1_customer_000123456_order_000987", "PROD-EU-WEST-1-ORDERS-QUEUE-2024",
    "ThisIsAVeryLongCamelCaseIdentifier2024", "A1B2C3D4E5F6G7H8I9J0K1L2", "customer2024order0042invoice7781",
    "gid://shopify/Order/1234567890", "arn:aws:sqs:us-east-1:123456789012:critical",
    "arn:aws:iam::123456789012:role/billing-service",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    # ULIDs and KSUIDs
    "01ARZ3NDEKTSV4RRFFQ69G5FAV", "01HGW2N7EHJVGV7W0NN7ZJ5KQZ", "0ujsswThIGTUYm2K8FjOOfXtY1K",
    "1hSMNZdWUmJ8CsMFf8JTSjVFnXU", "27owyVbE5k0yFhMjZYuLNQvTKxE", "2YBXZMNinaMN7IF0hXCPxZk43IZ",
    "2ijNPGZOFNoWAuxM77kLy7ahlLR", "2SuceMZSfjR83R2UXCZVWC7VC92",
    # Stripe-style object ids
    "cus_NffrFeUfNV2Hib", "pi_3MtwBwLkdIwHu7ix28a3tqPa", "ch_3MmlLrLkdIwHu7ix0snN0B15",
    "evt_1NG8Du2eZvKYlo2CUI79vXWy", "sub_1MowQVLkdIwHu7ixeRlqHVzs", "prod_NWjs8kKbJWmuuc",
    "price_1MoBy5LkdIwHu7ixZhnattbh", "in_1MtHbELkdIwHu7ixl4OzzPMv", "acct_1032D82eZvKYlo2C",
    "card_1MvoiELkdIwHu7ixOeFGbN9D", "pm_1MqLiJLkdIwHu7ixUEgbFdYF", "seti_1Mm8s8LkdIwHu7ix0OXBfTRG",
    "tok_visa", "cs_test_a1b2c3d4e5f6g7h8",
    # order numbers
    "ORD-2024-000123", "PO-88213-A", "INV-2023-11-0042", "SO#100234", "2024-000123", "A-1001-B",
    "ORDER_20240115_0042", "12-3456-7890", "R-2024-11-30-0007", "WO-0042-2024", "RMA-77-1234-56",
    "2024/INV/000042",
    # digit-only ids and numbers
    "1234567890", "000123456789", "98765432101", "42", "7", "100000000001", "555", "31415926535",
    "20240115", "9007199254740991", "18446744073709551615", "1541815603606036480", "175928847299117063",
    "4006381333931", "449044304137821", "2500", "12.50", "99.9", "10115", "123456789",
    # epoch timestamps
    "1700000000", "1717171717", "1700000000123", "1699999999999", "0", "2147483647", "1735689600",
    "1704067200000",
    # ISBNs
    "978-3-16-148410-0", "9783161484100", "0-306-40615-2", "0306406152", "978-0-306-40615-7",
    "ISBN 978-1-4028-9462-6", "99921-58-10-7", "960-425-059-0", "80-902734-1-6", "85-359-0277-5",
    "1-84356-028-3", "0-684-84328-5", "0-8044-2957-X", "0-85131-041-9", "93-86954-21-4", "0-943396-04-2",
    "0-9752298-0-X",
    # object keys and URLs
    "uploads/partner-docs/p-2001/up-6001.pdf",
    "documents/p-2001/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.pdf",
    "Photos/2024/Summer/IMG_0042.JPG", "Invoices/ACME-Corp/2024/INV-000123.pdf",
    "tenants/EU/West/Reports/Q3-Summary.xlsx", "images/icon@2x.png", "cv/cv-4001/Resume_Final_v2.pdf",
    "logs/2024/01/15/app-server-01.log.gz", "exports/CustomerOrders2024Q1Final", "ads/ad-3001/original",
    "Backups/DynamoDB/JobsTable/2024-01-15T00-00-00Z", "s3://my-bucket/Reports/2024/Annual.pdf",
    "profile-pictures/U1001/Avatar_Large.webp", "media/Video/Trailer_4K_HDR.mp4",
    "static/js/main.3f2a1b4c.chunk.js", "thumbnails/ad-3003/320x200.jpg", "Exports/PartnerStatements/P2001/Q1",
    "https://example.com/orders/ORD-2024-000123", "https://cdn.example.com/img/ad-3001.jpg?w=320&h=200",
    "https://example.com/search?q=basic+monthly&page=2", "https://example.com/cb?code=ORD-2024",
    "https://example.com/files?key=logo.png",
    # product words and other text
    "basic monthly", "bearer bonds", "premium annual", "token ring adapter", "Secret Santa gift box",
    "password-reset", "email.password-reset.v1", "partner-verification", "referral-bonus", "promo",
    "WELCOME", "gold tier", "Basic plan", "pro yearly", "Token of appreciation", "Bearer of good news",
    "authorization pending", "key lime pie", "pin-tumbler lock", "pass-through", "access denied",
    "at home", "meet at noon", "look at this", "phone case blue", "email marketing bundle",
    "credit card holder (leather)", "Premium Plus", "Tokenizer v2", "secretary desk", "API Key rotation",
    "Free Trial", "basic", "monthly", "auth:pending", "pin:1", "sig:v1", "token=", "Basic", "Bearer",
    "Token 42", "session:2024-spring",
    # dates, versions, codes
    "2024-01-15", "2024-01-15T10:30:00Z", "15/01/2024", "01.02.2024", "10:30", "v1.2.3", "2.0.1-beta.3",
    "EUR", "USD", "DE", "GB", "en-GB", "de_DE", "US-EAST-1", "eu-west-1", "#ff8800", "ALL-CAPS-CODE",
    # other systems' ids with a scheme-like prefix, a path or a fragment (what an ExternalId holds)
    "stripe:cus_NffrFeUfNV2Hib", "stripe:pi_3MtwBwLkdIwHu7ix28a3tqPa", "shopify:gid://shopify/Order/1234567890",
    "slack:C024BE91L", "slack:T024BE7LD/U024BE7LH", "github:octocat/hello-world#42", "jira:PROJ-1234",
    "urn:isbn:0451450523", "token:ring-adapter", "key:logo.png", "bearer:bonds", "zendesk:ticket/88213",
    "https://hooks.example.com/orders/ORD-2024-000123", "https://example.com/callback#section-2",
    "https://discord.com/channels/123456789012345678/987654321098765432", "https://hooks.slack.com/apps/A0123456789",
    "https://api.example.com/v1/keys/key_2024_rotation", "https://example.com/docs#token-rotation",
    "https://example.com/u/01ARZ3NDEKTSV4RRFFQ69G5FAV", "https://example.com/o/550e8400-e29b-41d4-a716-446655440000",
    "https://cdn.example.com/a/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.png",
    "s3://my-bucket/sk_test_fixtures/readme.md", "gs://bucket/objects/0ujsswThIGTUYm2K8FjOOfXtY1K",
]  # fmt: skip

TRUE_NAMES: list[str] = [
    "password", "pwd", "passwd", "user_password", "passwordHash", "db_pass", "passphrase", "secret",
    "client_secret", "webhook_secret", "apiKey", "api_key", "x_api_key", "APIKey", "access_key",
    "private_key", "signing_key", "encryption_key", "token", "reset_token", "accessToken", "refresh_token",
    "id_token", "bearer_token", "jwt", "authorization", "auth", "auth_code", "authz_header", "cookie",
    "session_id", "sessionId", "otp", "mfa_code", "pin", "pin_code", "cvc", "cvv", "cvv2", "card_no",
    "card_number", "cardNumber", "creditcard", "cc_number", "card_expiry", "security_code", "iban",
    "account_number", "routing_number", "sort_code", "national_id", "nationalId", "ssn", "ssn_last4",
    "tax_id", "passport", "passport_number", "drivers_license", "email", "user_email", "emailAddress",
    "e_mail", "phone", "phone_number", "mobile", "msisdn", "fax", "address", "home_address", "ip_address",
    "postcode", "dob", "date_of_birth", "birthdate", "first_name", "lastName", "full_name", "surname",
    "salary", "userpassword", "clientsecret",
]  # fmt: skip

ABBREVIATED_NAMES: list[str] = [
    # secrets
    "pw", "user_pw", "pswd", "pword", "passwrd", "tok", "api_tok", "access_tok", "refresh_tok", "tkn", "auth_tkn",
    "creds", "db_creds", "priv_key", "pvt_key", "hmac_key", "sec_key", "pwdhash", "apitok",
    # contact data
    "tel", "tel_no", "tel_num", "telnum", "mob", "mob_no", "mob_num", "cell_no", "cellphone", "cell_phone",
    "ph_no", "ph_num", "phonenum", "eml", "eml_addr", "email_addr", "emailaddr", "mail", "mail_addr", "mailaddr",
    "user_mail", "contact_mail", "addr", "home_addr", "street_addr", "billing_addr", "shipping_addr", "ip_addr",
    "mobno", "phn", "bday",
]  # fmt: skip
"""Abbreviated names of secret and contact fields (each also in TRUE_NAMES)."""

FALSE_NAMES: list[str] = [
    "tokenizer_version", "tokenizer_model", "author_id", "authored_by", "authority_code", "passenger_id",
    "pass_count", "boarding_pass_id", "passage_id", "password_policy_id", "password_reset_id",
    "password_changed_at", "email_template_id", "email_verified", "phone_verified_at", "address_id",
    "card_id", "token_count", "max_tokens", "token_limit", "secret_arn", "secret_name", "secret_version",
    "key_id", "api_key_id", "object_key", "idempotency_key", "partition_key", "sort_key", "source_key",
    "image_key", "routing_key", "upload_id", "user_id", "partner_id", "order_number", "invoice_number",
    "tracking_number", "isbn", "sku", "plan", "tier", "amount_cents", "currency", "country_code", "locale",
    "timezone", "pinned", "spinner_id", "opinion_id", "keyboard_layout", "monkey_id", "secretary_id",
    "telemetry_id", "hotel_id", "mobile_app_version", "address_line_count", "cookie_consent_version",
    "birthday_reminder_enabled", "credit_limit_cents", "card_count", "expiry_date", "bank_id",
    "session_count", "authentication_method", "auth_provider", "benefit", "profile_id", "ad_id",
    "correlation_id", "operation_id", "attempt", "urgent", "reason_code", "signal_strength",
    # near the abbreviations: what they must not catch
    "max_tok", "tok_count", "token_bucket_id", "stock_id", "cell_ref", "cell_range", "spreadsheet_cell",
    "mob_level", "mail_template_id", "mail_queue", "mailbox_id", "mail_provider", "addr_family", "ph_level",
    "pwm_channel", "private_key_id", "priv_level", "eml_template_id", "telemetry_version", "hotel_name",
    "zip_archive_key", "keyboard_id", "tel_verified_at", "pw_policy_id", "addressee_id",
]  # fmt: skip

for _kind, _values in EXTERNAL_ID_VALUES.items():  # the probe sets count among the true cases
    TRUE_VALUES[_kind] = [*TRUE_VALUES[_kind], *_values]
TRUE_NAMES = [*TRUE_NAMES, *ABBREVIATED_NAMES]
