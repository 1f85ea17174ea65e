"""Real local receivers for the notification tests: an SMTP server (aiosmtpd, with AUTH) and an HTTP
webhook receiver (http.server in a thread) that accepts POSTs on one secret path only."""

from __future__ import annotations

import email
import email.policy
import html
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SMTP_USER, SMTP_PASSWORD = "rebalancer", "smtp-Pa55-7f3c9e"
WEBHOOK_PATH, WEBHOOK_TOKEN = "/services/T0001/B0002/whk5ecretPath9d1", "webhook-Bearer-4e1a"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Mail:
    sender: str
    recipients: list[str]
    subject: str
    body: str
    headers: dict[str, str]
    login: str | None

    @property
    def text(self) -> str:
        """The HTML body as a reader sees it (tags dropped, entities decoded)."""
        return html.unescape(re.sub(r"<[^>]+>", "", self.body))

    @property
    def raw(self) -> str:
        return json.dumps([self.subject, self.body, self.headers])


class SmtpServer:
    """aiosmtpd on 127.0.0.1 requiring AUTH (``SMTP_USER`` / ``SMTP_PASSWORD``) over plain SMTP."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        self.mails: list[Mail] = []
        self.lock = threading.Lock()
        outer = self

        def authenticator(server, session, envelope, mechanism, auth_data):
            ok = auth_data.login == SMTP_USER.encode() and auth_data.password == SMTP_PASSWORD.encode()
            return AuthResult(success=ok, auth_data=auth_data)

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                msg = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
                parts = [p.get_content() for p in msg.walk() if p.get_content_maintype() == "text"]
                login = session.auth_data.login.decode() if session.authenticated else None
                with outer.lock:
                    outer.mails.append(
                        Mail(
                            envelope.mail_from,
                            list(envelope.rcpt_tos),
                            str(msg["Subject"]),
                            "\n".join(parts),
                            {k: str(v) for k, v in msg.items()},
                            login,
                        )
                    )
                return "250 OK"

        self.port = free_port()
        # AUTH without TLS on a local test server: aiosmtpd warns at every session (pyproject's filterwarnings)
        self.controller = Controller(
            Handler(),
            hostname="127.0.0.1",
            port=self.port,
            authenticator=authenticator,
            auth_require_tls=False,
            auth_required=True,
        )

    def connection(self, to: str = "oncall@example.test") -> dict[str, Any]:
        return {
            "conn_type": "smtp",
            "host": "127.0.0.1",
            "port": self.port,
            "login": SMTP_USER,
            "password": SMTP_PASSWORD,
            "extra": {
                "from_email": "pulsar-rebalance@example.test",
                "to": to,
                "disable_ssl": True,
                "disable_tls": True,
                "timeout": 10,
                "retry_limit": 0,
            },
        }

    def received(self) -> list[Mail]:
        with self.lock:
            return list(self.mails)

    def __enter__(self) -> SmtpServer:
        self.controller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.controller.stop()


@dataclass
class Hook:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: str


@dataclass
class WebhookReceiver:
    """Accepts JSON POSTs on ``WEBHOOK_PATH`` (200) and refuses anything else (404); records them all."""

    posts: list[Hook] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        outer = self
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                with outer.lock:
                    if self.path != WEBHOOK_PATH:
                        outer.refused.append(self.path)
                        self.send_response(404)
                    else:
                        outer.posts.append(Hook(self.path, dict(self.headers), json.loads(raw), raw))
                        self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:  # quiet test output
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{WEBHOOK_PATH}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def connection(self, url: str | None = None) -> dict[str, Any]:
        return {"conn_type": "http", "host": url or self.url, "password": WEBHOOK_TOKEN}

    def received(self) -> list[Hook]:
        with self.lock:
            return list(self.posts)

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
