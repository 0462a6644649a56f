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

__all__ = ["MASK", "redact"]

MASK = "***"

# user-info with a password; the password may hold any character but '@' ends it at the last
# '@' before the host (a password with an unescaped '@' is itself redacted whole)
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*:/{1,2}[^\s:/?#@]*:)(?P<secret>\S*)@(?=[^\s@]*(?:\s|$))")
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
    s = str(text)
    s = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK + "@", s)
    s = _QUERY.sub(lambda m: m.group("head") + MASK, s)
    return _KEYVALUE.sub(lambda m: m.group("head") + MASK, s)
