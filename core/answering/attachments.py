"""Images attached to a chat prompt, from a path a person types or pastes.

Why this module exists: a chat prompt takes image files the way a terminal
hands them over (a typed path with completion; a pasted or dropped path,
quoted, with backslash-escaped spaces, or as a `file://` URI), and the
transcript shows each one as a placeholder with its name and size. Reading
and checking the file is the sample sets' own reader (`core.answering.sampleset.load_image`:
PNG, JPEG, GIF or WebP by their magic bytes, at most 5 MB, hashed), so an
image is accepted or refused the same way in a chat and in `lineup run`.
No UI here: the TUI's attach dialog and prompt box call these functions.
"""

from __future__ import annotations

import base64
import os
import shlex
from pathlib import Path
from urllib.parse import unquote, urlsplit

from core.answering.sampleset import MAX_IMAGE_BYTES, SampleSetError, image_mime, load_image
from providers.events import ImagePart

__all__ = ["AttachError", "IMAGE_SUFFIXES", "MAX_ATTACHMENTS", "common_completion", "complete_path", "human_size",
           "image_bytes", "image_name", "image_size", "load_attachment", "pasted_paths", "placeholder"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
MAX_ATTACHMENTS = 8            # images on one prompt
MAX_COMPLETIONS = 50


class AttachError(ValueError):
    """An image that cannot be attached; the message names the file and why."""


def _expand(path: str) -> Path:
    return Path(os.path.expanduser(path.strip()))


def load_attachment(path: str | os.PathLike[str]) -> ImagePart:
    """The image at `path` (`~` expanded) as an image part, or `AttachError`
    naming the file: missing, not a regular file, over 5 MB, not PNG, JPEG,
    GIF or WebP."""
    p = _expand(os.fspath(path))
    if not str(path).strip():
        raise AttachError("no file named")
    try:
        return load_image(p, label=str(p))
    except SampleSetError as exc:
        raise AttachError("; ".join(exc.problems)) from None
    except OSError as exc:
        raise AttachError(f"image file unreadable: {p}: {exc.strerror or exc}") from None


def image_size(part: ImagePart) -> int:
    """The image's size in bytes (from its base64 data, without decoding it)."""
    data = part.data
    return len(data) * 3 // 4 - (2 if data.endswith("==") else 1 if data.endswith("=") else 0)


def image_bytes(part: ImagePart) -> bytes:
    return base64.b64decode(part.data)


def image_name(part: ImagePart | dict) -> str:
    """The file name an image was attached from (its path's last part)."""
    path = part.get("path") if isinstance(part, dict) else part.path
    return os.path.basename(str(path or "")) or "image"


def image_record(part: ImagePart) -> dict:
    """What a turn records of an image it carried (the bytes go to the
    store's image table): path, name, size, hash and type. The name and size
    are what every transcript's `placeholder` shows, in a chat, a run's or
    a load profile's turns alike."""
    return {"path": part.path, "name": image_name(part), "size": image_size(part), "sha256": part.sha256,
            "mime": part.mime}


def human_size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.1f} KB"
    return f"{n / 1_000_000:.1f} MB"


def placeholder(part: ImagePart | dict) -> str:
    """What a transcript shows for an attached image: `[image: chart.png · 34.1 KB]`."""
    size = part.get("size") if isinstance(part, dict) else image_size(part)
    return f"[image: {image_name(part)} · {human_size(size if isinstance(size, int) else None)}]"


def _candidate(token: str) -> str:
    if token.startswith("file://"):
        parts = urlsplit(token)
        return unquote(parts.path)
    return token


def _is_image_file(path: Path) -> bool:
    try:
        if not path.is_file():
            return False
        if path.stat().st_size > MAX_IMAGE_BYTES:   # an image still: attaching it says it is too large
            return path.suffix.lower() in IMAGE_SUFFIXES
        with path.open("rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    return image_mime(head) is not None or path.suffix.lower() in IMAGE_SUFFIXES


def pasted_paths(text: str) -> list[str] | None:
    """The image files a paste names, when it names nothing else: one or more
    paths (a line each, or several on one line as a terminal's drag and drop
    writes them: quoted or with `\\ ` for spaces, or `file://` URIs), every
    one an existing image file. None when the paste is ordinary text (it is
    then typed into the prompt as it is)."""
    stripped = text.strip()
    if not stripped or len(stripped) > 8192:
        return None
    found: list[str] = []
    for line in stripped.splitlines():
        line = line.strip()
        if not line:
            continue
        if _is_image_file(_expand(_candidate(line))):     # a path with spaces, unquoted
            found.append(str(_expand(_candidate(line))))
            continue
        try:
            tokens = shlex.split(line)
        except ValueError:
            return None
        for token in tokens:
            path = _expand(_candidate(token))
            if not _is_image_file(path):
                return None
            found.append(str(path))
    if not found or len(found) > MAX_ATTACHMENTS:
        return None
    return found


def complete_path(prefix: str) -> list[str]:
    """What `prefix` (a path being typed) may become: folders (ending in `/`)
    and image files beside it whose names start with what is typed, sorted;
    hidden ones only once a `.` is typed. At most 50."""
    raw = prefix or ""
    expanded = os.path.expanduser(raw)
    folder, start = os.path.split(expanded)
    base = Path(folder) if folder else Path(".")
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return []
    shown_folder = raw[: len(raw) - len(start)]
    out: list[str] = []
    for entry in entries:
        name = entry.name
        if not name.startswith(start) or (name.startswith(".") and not start.startswith(".")):
            continue
        try:
            is_dir = entry.is_dir()
        except OSError:
            continue
        if is_dir:
            out.append(shown_folder + name + "/")
        elif name.lower().endswith(IMAGE_SUFFIXES):
            out.append(shown_folder + name)
        if len(out) >= MAX_COMPLETIONS:
            break
    return out


def common_completion(prefix: str) -> str:
    """`prefix` completed as far as every completion agrees (Tab in the attach prompt)."""
    options = complete_path(prefix)
    if not options:
        return prefix
    common = os.path.commonprefix(options)
    return common if len(common) > len(prefix) else prefix
