"""The catalogue of secret shapes ``redact_text`` looks for, and the gates that skip text early.

The shapes follow public catalogues of credential formats (gitleaks' and detect-secrets' rules):
each provider's fixed prefix, its alphabet and its length. A shape is only a pattern: a secret
whose provider writes no recognisable prefix (a database password printed alone) is found only
by the name it is assigned to (``redact``'s assignment rules), or not at all.

Three gates sit in front of the rules, and each must let every shape through (tests check it
for every entry of the catalogue): ``MAYBE_SECRET`` (one character each shape must contain),
``ANYTHING`` (a literal or a short pattern each shape must contain, as written) and
``ANY_NEEDED_LITERAL`` (the same in lowercased text, for the proofs that a value is clean).
"""

from __future__ import annotations

import re

__all__ = [
    "ANYTHING",
    "ANY_NEEDED_LITERAL",
    "AWS_KEY_ID",
    "AWS_SECRET_BESIDE_ID",
    "BLOCK_BEGIN",
    "BLOCK_END",
    "GITHUB",
    "HINTED_RULES",
    "MAYBE_SECRET",
    "NEEDED_LITERALS",
    "NEEDED_PATTERNS",
    "REDACTED",
    "SHAPES",
    "TOKEN_RULES",
]

REDACTED = "[REDACTED]"

# Every pattern starts with a literal, so the regex engine skips through text without it about
# as fast as str.find; the ASCII word boundary is a lookbehind placed after that literal. Each
# rule first checks for a substring its secret must contain (a memchr-fast test), so ordinary
# text skips most rules outright.


def _after_boundary(literal: str, rest: str, boundary: str = "A-Za-z0-9_") -> re.Pattern[str]:
    return re.compile(re.escape(literal) + f"(?<![{boundary}]{re.escape(literal)})" + rest)


_END = r"(?![A-Za-z0-9_])"
# PEM (PKCS#1, PKCS#8, EC, OpenSSH, encrypted) and PGP private key blocks share these lines.
_BLOCK_LABEL = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
BLOCK_BEGIN = re.compile(r"-----BEGIN " + _BLOCK_LABEL)
BLOCK_END = re.compile(r"-----END " + _BLOCK_LABEL)

TOKEN_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "-----BEGIN",
        # A block cut short (no END line) is redacted to the end of the text.
        re.compile(
            r"-----BEGIN " + _BLOCK_LABEL + r"(?:[\s\S]*?-----END " + _BLOCK_LABEL + r"|[\s\S]*)"
        ),
        REDACTED,
    ),
    # OpenAI and Anthropic (sk-, sk-proj-, sk-ant-)
    ("sk-", _after_boundary("sk-", r"[A-Za-z0-9_-]{16,}"), REDACTED),
    # Stripe secret and restricted keys, webhook signing secrets
    (
        "k_",
        re.compile(r"[rs]k_(?<![A-Za-z0-9_][rs]k_)(?:live|test|prod)_[A-Za-z0-9]{10,}"),
        REDACTED,
    ),
    ("whsec_", _after_boundary("whsec_", r"[A-Za-z0-9+/=]{24,}"), REDACTED),
    # GitHub
    ("_", _after_boundary("gh", r"[pousr]_[A-Za-z0-9]{20,}"), REDACTED),
    ("github_pat_", _after_boundary("github_pat_", r"[A-Za-z0-9_]{20,}"), REDACTED),
    # GitLab personal, deploy, runner, trigger, OAuth application tokens
    ("gl", _after_boundary("gl", r"(?:pat|ptt|dt|rt|cbt|soat|oas)-[A-Za-z0-9_-]{20,}"), REDACTED),
    # Hugging Face user and organisation tokens
    ("hf_", _after_boundary("hf_", r"[A-Za-z0-9]{30,}"), REDACTED),
    ("api_org_", _after_boundary("api_org_", r"[A-Za-z0-9]{30,}"), REDACTED),
    # Slack tokens and incoming webhooks
    ("xox", _after_boundary("xox", r"[abeprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    ("xapp-", _after_boundary("xapp-", r"[0-9]-[A-Za-z0-9-]{10,}"), REDACTED),
    (
        "hooks.slack.com/",
        re.compile(r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_+-]{16,}"),
        r"\g<1>" + REDACTED,
    ),
    # AWS access key ids (the secret beside one is handled by AWS_SECRET_BESIDE_ID)
    ("A", _after_boundary("A", r"(?:KI|SI)A[0-9A-Z]{16}" + _END), REDACTED),
    # Google API keys and OAuth access tokens
    ("AIza", _after_boundary("AIza", r"[0-9A-Za-z_-]{30,}"), REDACTED),
    ("ya29.", _after_boundary("ya29.", r"[0-9A-Za-z_-]{20,}"), REDACTED),
    # JSON Web Tokens
    (
        "eyJ",
        _after_boundary("eyJ", r"[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        REDACTED,
    ),
    # npm, PyPI (a macaroon whose base64 starts with AgE)
    ("npm_", _after_boundary("npm_", r"[A-Za-z0-9]{30,}"), REDACTED),
    ("pypi-", _after_boundary("pypi-", r"AgE[A-Za-z0-9_-]{40,}"), REDACTED),
    # SendGrid, Twilio API key sids, Databricks
    ("SG.", _after_boundary("SG.", r"[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), REDACTED),
    ("SK", _after_boundary("SK", r"[0-9a-fA-F]{32}" + _END), REDACTED),
    ("dapi", _after_boundary("dapi", r"[0-9a-f]{32}(?:-[0-9]+)?" + _END), REDACTED),
    # Azure shared access signatures (the sig= member of a SAS query or connection string)
    ("sig=", _after_boundary("sig=", r"[A-Za-z0-9%+/]{16,}=*", "A-Za-z0-9_"), "sig=" + REDACTED),
    # The key of trialrun's own local services (a case's, or a standalone server's --token),
    # which rides in the base URL handed to the agent: /key/<key>/...
    ("/key/", re.compile(r"(/key/)[A-Za-z0-9_~.%-]{16,}"), r"\g<1>" + REDACTED),
    (
        "@",
        re.compile(r"(://[^\s/?#@:\"']*:)(?![\"']?\[REDACTED\])[^\s/?#@]+@"),
        r"\g<1>" + REDACTED + "@",
    ),
)

# Rules whose secret has no literal of its own: each runs only where its hint (a cheap search
# that starts at a literal) finds the part every such secret holds.
HINTED_RULES: tuple[tuple[re.Pattern[str], re.Pattern[str], str], ...] = (
    # Discord bot tokens: base64 of the bot's id (it starts with M, N or O), a dot, a timestamp,
    # a dot, an HMAC.
    (
        re.compile(r"\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27}"),
        re.compile(
            r"[MNO](?<![A-Za-z0-9_-][MNO])[A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\."
            r"[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_-])"
        ),
        REDACTED,
    ),
)

AWS_KEY_ID = re.compile(r"A(?<![A-Za-z0-9_]A)(?:KI|SI)A[0-9A-Z]{16}" + _END)
# 40 characters of base64 standing alone: an AWS secret access key when a key id is near it.
# Hex alone (a SHA-1) is left: a secret key holds letters outside a-f or a / or +.
AWS_SECRET_BESIDE_ID = re.compile(
    r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[g-zG-Z/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)

# ---- gates -------------------------------------------------------------------------------

# One character each rule's match must hold; a character-class scan is far cheaper than
# the alternation below and clears much text (``bearer`` matches ASCII letters only, even
# ignoring case; ``sig=`` and assignments hold ``=`` or ``:``; a service key's path ``y``).
MAYBE_SECRET = re.compile("[-_xAJ=:bB.KSpy]")
# A literal (or short pattern) every token rule's match holds, as written. Each branch starts at
# the literal's rarest character (``-``, ``_``, ``z``, ``J``, ``K``...) and checks what comes
# before it with a lookbehind, so the search stops at few places in ordinary text.
_SHAPE_LITERALS = (
    r"-(?:(?<=sk-)|(?<=pypi-)|(?<=xapp-)|(?<=glpat-)|(?<=glptt-)|(?<=gldt-)|(?<=glrt-)"
    r"|(?<=glcbt-)|(?<=glsoat-)|(?<=gloas-)|----BEGIN)"
    r"|_(?:(?<=[rs]k_)(?:live|test|prod)_|(?<=whsec_)|(?<=gh[pousr]_)|(?<=github_pat_)"
    r"|(?<=hf_)|(?<=api_org_)|(?<=npm_))"
    r"|xox|/(?:(?<=hooks\.slack\.com/)|(?<=/key/))|AKIA|ASIA|z(?<=AIz)a|9\.(?<=ya29\.)|J(?<=eyJ)"
    r"|G(?<=SG)\.|K(?<=SK)[0-9a-fA-F]{32}|dapi|\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27}"
)
# ``[=:]`` stands for every assignment (and ``sig=``).
ANYTHING = re.compile(_SHAPE_LITERALS + r"|[=:]|(?i:bearer)")
# The same for the token rules alone (the URL rule's ``://`` and ``sig=`` included).
SHAPES = re.compile(_SHAPE_LITERALS + r"|=(?<=sig=)|://|(?i:bearer)")

# Lowercased, every secret's name holds a noun of redact's (or is ``bearer`` / ``jwt``) and
# every shape holds one of these literals or matches one of NEEDED_PATTERNS.
NOUNS = ("pass", "pwd", "secret", "token", "key", "credential", "cookie", "authoriz", "session")
NEEDED_LITERALS = (
    *NOUNS,
    *("bearer", "jwt", "sk-", "xox", "akia", "asia", "aiza", "eyj", "npm_", "-----begin", "://"),
    *("k_live_", "k_test_", "k_prod_", "whsec_", "hf_", "api_org_", "xapp-", "hooks.slack.com/"),
    *("ya29.", "pypi-", "sg.", "dapi", "sig="),
)
GITHUB = "gh[pousr]_|github_pat_"
NEEDED_PATTERNS = (
    r"gl(?:pat|ptt|dt|rt|cbt|soat|oas)-|sk[0-9a-f]{32}|\.[a-z0-9_-]{6,7}\.[a-z0-9_-]{27}"
)
# Those literals in one pass, each branch starting at the literal's rarest character (k, z, j,
# b, x, /, p where there is one) and checking what comes before it with a lookbehind, so the
# search stops at few places: half the cost of a plain alternation on short strings and a
# third of one ``in`` per literal; as fast as the ``in``s on long text.
# tests/base/test_redact.py checks that it finds exactly NEEDED_LITERALS, GITHUB and
# NEEDED_PATTERNS.
ANY_NEEDED_LITERAL = re.compile(
    r"k(?:ey|(?<=tok)en|(?<=cook)ie|(?<=sk)-|(?<=ak)ia|_(?:live|test|prod)_|(?<=sk)[0-9a-f]{32})"
    r"|p(?:ass|wd|(?<=np)m_|(?<=pyp)i-|(?<=dap)i)"
    r"|z(?:(?<=authoriz)|(?<=aiz)a)"
    r"|j(?:wt|(?<=eyj))"
    r"|b(?:earer|(?<=-----b)egin)"
    r"|x(?:ox|app-)"
    r"|/(?:(?<=:/)/|(?<=hooks\.slack\.com/))"
    r"|s(?:e(?:ssion|cret)|(?<=as)ia|(?<=whs)ec_|ig=|g\.)"
    r"|-(?:(?<=glpat-)|(?<=glptt-)|(?<=gldt-)|(?<=glrt-)|(?<=glcbt-)|(?<=glsoat-)|(?<=gloas-))"
    r"|f_(?<=hf_)|i_org_(?<=api_org_)|9\.(?<=ya29\.)|\.[a-z0-9_-]{6,7}\.[a-z0-9_-]{27}"
    r"|credential|" + GITHUB
)
