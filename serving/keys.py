"""API keys: which tenant a request's `Authorization: Bearer KEY` speaks for.

The file `SEAMS_API_KEYS` names holds one `TENANT KEY` pair per line (contract); blank lines and
lines starting with `#` are skipped. A key is at least `MIN_KEY_CHARS` printable characters
without spaces; one tenant may have several keys (rotation: add the new one, move clients, remove
the old one, restart). Keys live in that file only, never in seams.yaml, and are never logged:
errors name the file and the line number, not the line.

A presented key is compared with every known key in constant time (`hmac.compare_digest` over
their SHA-256 digests, so every comparison has the same length and no early exit tells how much
of a key matched, nor which key it was close to).
"""

from __future__ import annotations

import hashlib
import hmac
import stat
from dataclasses import dataclass
from pathlib import Path

from seams.environment import API_KEYS_ENV
from seams.errors import ConfigError, StorageError
from seams.storage.tenants import tenant_role

MIN_KEY_CHARS = 16


@dataclass(frozen=True)
class ApiKeys:
    """The keys of one file: (sha256 of the key, tenant) pairs, in file order."""

    entries: tuple[tuple[bytes, str], ...]
    source: Path | None = None

    @property
    def tenants(self) -> tuple[str, ...]:
        """Every tenant that has a key, sorted."""
        return tuple(sorted({tenant for _, tenant in self.entries}))

    def tenant_for(self, presented: str) -> str | None:
        """The tenant whose key `presented` is, or None; the same work whatever it matches."""
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found: str | None = None
        for known, tenant in self.entries:
            if hmac.compare_digest(digest, known) and found is None:
                found = tenant
        return found

    @classmethod
    def read(cls, path: Path) -> ApiKeys:
        """The keys of `path`, or a one-line `ConfigError` naming the file and line."""
        where = f"{API_KEYS_ENV}={path}"
        try:
            text = path.read_text(encoding="utf-8")
            mode = path.stat().st_mode
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigError(f"{where}: cannot read the API keys file ({reason})") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(
                f"{where}: the API keys file may be read by other users of this machine: "
                f"`chmod 600 {path}`"
            )
        entries: list[tuple[bytes, str]] = []
        seen: set[bytes] = set()
        for number, line in enumerate(text.splitlines(), 1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            if len(fields) != 2:
                raise ConfigError(
                    f"{where}, line {number}: expected `TENANT KEY` (two fields separated by "
                    f"a space), found {len(fields)} field(s)"
                )
            tenant, key = fields
            try:
                tenant_role(tenant)
            except StorageError as exc:
                raise ConfigError(f"{where}, line {number}: {exc}") from None
            if len(key) < MIN_KEY_CHARS or not key.isprintable():
                raise ConfigError(
                    f"{where}, line {number}: the key of tenant {tenant!r} is shorter than "
                    f"{MIN_KEY_CHARS} printable characters: use a long random one, e.g. "
                    "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
                )
            digest = hashlib.sha256(key.encode("utf-8")).digest()
            if digest in seen:
                raise ConfigError(f"{where}, line {number}: this key is already on another line")
            seen.add(digest)
            entries.append((digest, tenant))
        if not entries:
            raise ConfigError(
                f"{where}: the API keys file holds no `TENANT KEY` line; add one, or unset "
                f"{API_KEYS_ENV} to serve without keys (loopback only)"
            )
        return cls(tuple(entries), path)
