"""URL helpers shared by every layer (no dependencies): keep credentials out of messages and storage."""

from __future__ import annotations

import re

_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#]*)@")


def redact_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` shown as ``user:***@`` (for messages, logs and storage).

    >>> redact_userinfo("http://alice:s3cret@broker:8080/admin")
    'http://alice:***@broker:8080/admin'
    """
    match = _USERINFO.match(url)
    if match is None:
        return url
    user = match["userinfo"].split(":", 1)[0]
    return f"{match['scheme']}{user + ':' if user else ''}***@{url[match.end() :]}"
