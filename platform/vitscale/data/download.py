"""The one network path of vitscale.data: fetch an archive on explicit request (`download: true`).

Nothing calls this at import time. Offline, it fails with one line naming the URL, the
destination and the manual fix.
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from pathlib import Path

from vitscale.errors import UserError


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def fetch(url: str, dest: Path, md5: str | None, what: str) -> Path:
    """Download `url` to `dest` (via dest.part, renamed only when complete and verified)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    digest = hashlib.md5(usedforsecurity=False)
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(part, "wb") as out:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        part.unlink(missing_ok=True)
        raise UserError(
            f"{what}: download of {url} into {dest} failed ({_one_line(exc)}); "
            f"offline? copy {dest.name} into {dest.parent} by hand and rerun without download"
        ) from None
    if md5 is not None and digest.hexdigest() != md5:
        part.unlink(missing_ok=True)
        raise UserError(
            f"{what}: {url} arrived corrupted (md5 {digest.hexdigest()} != {md5}); rerun to retry"
        )
    part.replace(dest)
    return dest
