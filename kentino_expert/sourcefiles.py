"""The files a rule set is read from: each a regular file inside its own directory, checked before it is opened.

A served rules or knowledge directory is written by people and tools: it may hold a FIFO (an `open` that
never returns), a link to `/dev/zero` (a read that never ends), or a link to a file elsewhere (read with the
service's rights). Every reader of a rule set (the checker, the catalog, the sandbox's digest, `rules publish`)
goes through `read_source`, which refuses all three before reading a byte and reads at most MAX_FILE_BYTES:

- the name, links followed, must stay inside the directory (the directory itself may be a link);
- what it names must be a regular file, checked with `stat` before the open and with `fstat` after it, and the
  open is non-blocking (a FIFO swapped in between the two cannot block it);
- at most MAX_FILE_BYTES are read (a file that grows while read cannot fill the memory).
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_FILE_BYTES = 4 << 20  # a rule or knowledge file larger than this is refused (the loaders read YAML)
_READ_CHUNK = 1 << 16
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class SourceFileError(OSError):
    """A file a rule set would be read from that is not a regular file inside its directory, or too large;
    an OSError, so every reader's `except OSError` reports it at the file (its text is the reason)."""

    def __init__(self, path, reason: str):
        super().__init__(errno.EINVAL, reason, str(path))
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_source(path, root) -> Path:
    """`path` resolved, if it is a regular file inside `root` (links followed); else SourceFileError."""
    path, inside = Path(path), Path(root).resolve()
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a link loop (Python 3.11)
        raise SourceFileError(path, f"cannot read: {getattr(exc, 'strerror', None) or 'a symbolic link loop'}"
                              ) from None
    if not resolved.is_relative_to(inside):
        raise SourceFileError(path, f"refused: a link leading out of {root} (to {resolved}); a rule set is read only "
                              "from regular files inside its directory")
    mode = os.stat(resolved).st_mode
    if not stat.S_ISREG(mode):
        raise SourceFileError(path, f"refused: {_kind(mode)}, not a regular file; a rule set is read only from "
                              "regular files inside its directory")
    return resolved


def read_source(path, root, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of `path`, a regular file inside `root` of at most `limit` bytes; else SourceFileError (or the
    OSError of a file that cannot be read)."""
    resolved = check_source(path, root)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    descriptor = os.open(resolved, flags)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):  # swapped for something else after the check
            raise SourceFileError(path, f"refused: {_kind(mode)}, not a regular file")
        chunks, size = [], 0
        while chunk := os.read(descriptor, _READ_CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise SourceFileError(path, f"refused: larger than {limit >> 20} MiB")
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def yaml_files(root) -> list[Path]:
    """The `*.yaml` entries directly in `root` that a rule set is read from, sorted: hidden ones (an editor's lock
    or swap file) are not. Entries are listed, not opened: `read_source` checks each when it is read."""
    directory = Path(root)
    if not directory.is_dir():
        return []
    return sorted(path for path in directory.glob("*.yaml") if not path.name.startswith("."))
