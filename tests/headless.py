"""Headless Chromium for the HTML tests: run it (screenshot, DOM dump) and read the PNG it writes, pure Python."""
from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
SKIP_REASON = "headless Chromium not installed (apt-get install chromium) - HTML not rendered"


def chromium(args, tmp_path: Path, timeout: float = 90) -> subprocess.CompletedProcess:
    """Chromium headless with a fresh profile, no network of its own and no first-run work."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run",
               f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def png_rows(path: Path) -> tuple[int, int, int, list[bytearray]]:
    """(width, height, channels, the rows of pixel bytes) of an 8-bit RGB(A) PNG, every row unfiltered."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    offset, idat, header = 8, [], None
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset:offset + 4])
        kind = data[offset + 4:offset + 8]
        body = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        offset += 12 + length
    width, height, depth, colour = header[:4]
    assert depth == 8 and colour in (2, 6), f"unexpected PNG format depth={depth} colour={colour}"
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    previous, rows = bytearray(stride), []
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        _unfilter(kind, line, previous, channels)
        rows.append(line)
        previous = line
    return width, height, channels, rows


def _unfilter(kind: int, line: bytearray, previous: bytearray, channels: int) -> None:
    """Undo one row's PNG filter in place (Sub, Up, Average, Paeth)."""
    if kind == 0:
        return
    for i in range(len(line)):
        left = line[i - channels] if i >= channels else 0
        up = previous[i]
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
        elif kind == 4:
            corner = previous[i - channels] if i >= channels else 0
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF


def distinct_pixels(path: Path, rows: int = 64) -> tuple[int, int, set]:
    """Width, height and the distinct pixels of up to `rows` rows spread over the image (every 4th pixel)."""
    width, height, channels, lines = png_rows(path)
    keep = range(0, height, max(1, height // rows))
    return width, height, {bytes(lines[y][x:x + channels]) for y in keep for x in range(0, len(lines[y]), channels * 4)}
