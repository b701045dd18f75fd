"""Bearer-token auth for memtoc's HTTP surfaces (the ``/v1`` API and MCP over HTTP).

The token is a random secret (``secrets.token_urlsafe(32)``) kept in ``<home>/http-token`` with
file mode 0600. ``memtoc init`` creates it, ``memtoc serve`` creates it when it is missing, and
``memtoc token`` prints it. Every ``/v1`` request must carry ``Authorization: Bearer <token>``;
the comparison is constant-time.

Binding: the servers listen on 127.0.0.1 by default. ``check_bind`` refuses a non-loopback
address when no token is required (``--no-auth``): an unauthenticated memory must never be
reachable from the network.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from pathlib import Path

from memtoc.errors import ConfigError

TOKEN_FILE = "http-token"


def token_path(home: Path) -> Path:
    """Where the HTTP token of the data directory ``home`` lives."""
    return home / TOKEN_FILE


def read_token(home: Path) -> str | None:
    """The token stored in ``home`` (None when there is none yet)."""
    path = token_path(home)
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read the HTTP token {path}: {exc}") from exc
    if not token:
        raise ConfigError(f"the HTTP token file {path} is empty (run `memtoc token --rotate`)")
    return token


def write_token(home: Path) -> str:
    """Write a fresh random token to ``home`` (mode 0600, replacing any old one) and return it."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = token_path(home)
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{TOKEN_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        os.write(fd, (token + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)  # O_CREAT's mode is filtered by the umask; be explicit
    os.replace(tmp, path)
    return token


def ensure_token(home: Path) -> str:
    """The token of ``home``, created (mode 0600) when missing."""
    return read_token(home) or write_token(home)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine (127.0.0.0/8, ::1, localhost)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name or an address we cannot judge: treat as public


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve on a non-loopback ``host`` without a token (ConfigError)."""
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to bind {host} without a token: an address other than loopback "
            "(127.0.0.1, ::1, localhost) needs bearer-token auth (drop --no-auth)",
            setting="host",
        )


def bearer_ok(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header value carries ``token`` (constant-time compare)."""
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return secrets.compare_digest(value.strip().encode(), token.encode())
