"""Secrets never printed: one helper that redacts URLs, DSNs and key=value credentials.

Every message ptplan prints (errors, warnings, logs, exception text shown to a user) that may
quote a URL, a database DSN or a command line goes through :func:`redact`. It replaces

* the password of a URL's user-info, ``scheme://user:PASSWORD@host`` → ``scheme://user:***@host``
  (PostgreSQL, MySQL, MLflow tracking servers, HTTP proxies, ...);
* credentials in a query string (``?password=``, ``token=``, ``X-Amz-Signature=``, ...);
* ``key=value`` credentials of a libpq keyword DSN or a command line (``password=...``,
  ``secret=...``, ``aws_secret_access_key = ...``);
* AWS secret keys and session tokens given by name in an environment-like line.

The user name and host stay, so that a message still says which server was meant.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "redact", "redact_value"]

MASK = "***"

# a URL (``scheme://...`` or, once a path was normalised, ``scheme:/...``) up to whitespace:
# its user-info is everything before the token's last '@', the password what follows the
# user-info's first ':' (a user or password holding '@', '?' or '/' is still covered whole)
_URL = re.compile(r"(?P<scheme>(?:\b[A-Za-z][A-Za-z0-9+.\-]*)?:/{1,2})(?P<rest>\S*)")
_SECRET_WORDS = (r"password|passwd|pwd|pass|secret|token|access[_-]?token|refresh[_-]?token|"
                 r"api[_-]?key|apikey|client[_-]?secret|aws_secret_access_key|"
                 r"aws_session_token|sig|signature|x-amz-signature|x-amz-credential|"
                 r"x-amz-security-token|private[_-]?key|credentials?")
_QUERY = re.compile(rf"(?i)(?P<head>[?&;](?:{_SECRET_WORDS})=)(?P<secret>[^&#\s'\"]+)")
_KEYVALUE = re.compile(
    rf"(?i)(?P<head>(?<![\w-])(?:{_SECRET_WORDS})\s*=\s*)"
    r"(?P<secret>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;,'\")]+)")


def redact(text: object) -> str:
    """``text`` as a string with every credential replaced by ``***``."""
    s = _URL.sub(_mask_url, str(text))
    s = _QUERY.sub(lambda m: m.group("head") + MASK, s)
    return _KEYVALUE.sub(lambda m: m.group("head") + MASK, s)


def _mask_url(m: re.Match[str]) -> str:
    rest = m.group("rest")
    at = rest.rfind("@")
    user, colon, _password = rest[:at].partition(":") if at >= 0 else ("", "", "")
    if not colon:
        return m.group(0)
    return f"{m.group('scheme')}{user}:{MASK}{rest[at:]}"


def redact_value(value: str) -> str:
    """One value the user gave as a URL or DSN (``--ledger``, a tracking URI), redacted as a
    whole: its user-info runs from ``//`` to the value's last ``@`` even where it holds
    whitespace or control characters, which end a URL inside running text."""
    head, sep, rest = value.partition("//")
    userinfo, at, tail = rest.rpartition("@")
    if sep and at and ":" in userinfo:
        value = f"{head}{sep}{userinfo.split(':', 1)[0]}:{MASK}@{tail}"
    return redact(value)
