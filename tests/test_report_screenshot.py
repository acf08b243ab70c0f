"""The report renders in a real headless Chromium: inline CSS applied, inline script ran, nothing fetched.

Skips (with the reason) when no Chromium is installed, except under CI (``CI=true``), where it fails.
Install on Debian: ``apt-get install chromium``.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from evaltrace.report import write_report
from report_trace import build_demo_trace

WIDTH, HEIGHT = 1280, 900
HEADER_RGB = (0x1D, 0x23, 0x30)  # header background in report/assets.py
PAGE_RGB = (0xF7, 0xF8, 0xFB)  # page background


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    reason = "no Chromium on PATH (Debian: apt-get install chromium)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI is set but {reason}")
    pytest.skip(reason)


def run_chromium(browser: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
        f"--window-size={WIDTH},{HEIGHT}",
    ]  # fmt: skip
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=120, check=False)


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Minimal decoder for 8-bit RGB/RGBA non-interlaced PNGs (what Chromium writes): (width, height, rows)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, chunk = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and color in (2, 6) and interlace == 0
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        filt, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = prev[x], prev[x - channels] if x >= channels else 0
            if filt == 1:
                line[x] = (line[x] + a) & 0xFF
            elif filt == 2:
                line[x] = (line[x] + b) & 0xFF
            elif filt == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line[i] for i in range(stride) if i % channels < 3))  # keep RGB
        prev = line
    return width, height, rows


def pixel(rows: list[bytes], x: int, y: int) -> tuple[int, int, int]:
    r, g, b = rows[y][x * 3 : x * 3 + 3]
    return r, g, b


@pytest.fixture
def report(tmp_path: Path) -> Path:
    from evaltrace import config

    try:
        trace_id = build_demo_trace(tmp_path / "store")
    finally:
        handle = config.current_handle()
        if handle is not None:
            handle.shutdown()
    return write_report(trace_id, tmp_path / "report.html", tmp_path / "store")


def test_report_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    browser = chromium()
    shot = tmp_path / "report.png"
    result = run_chromium(browser, tmp_path, f"--screenshot={shot}", report.as_uri())
    assert shot.is_file(), result.stderr[-2000:]
    width, height, rows = decode_png(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    assert pixel(rows, 5, 5) == HEADER_RGB, "the inline stylesheet was not applied"
    assert pixel(rows, 5, 400) == PAGE_RGB
    colours = {rows[y][x : x + 3] for y in range(0, HEIGHT, 7) for x in range(0, WIDTH * 3, 21)}
    assert len(colours) > 50, "the page looks blank"


def test_inline_script_runs_and_marks_every_span(report: Path, tmp_path: Path) -> None:
    browser = chromium()
    result = run_chromium(browser, tmp_path, "--dump-dom", report.as_uri())
    assert 'data-report-ready="6"' in result.stdout, result.stderr[-2000:]  # 6 spans in the demo trace


PASS_RGB, FAIL_RGB, ERROR_RGB, NEUTRAL_RGB = (
    (0x1A, 0x7F, 0x37),
    (0xC6, 0x28, 0x28),
    (0xB4, 0x53, 0x09),
    (0x90, 0xA4, 0xAE),
)


def test_header_shows_each_evaluation_outcome_in_its_own_colour(tmp_path: Path) -> None:
    """Pass, fail, error and not-evaluated badges are all in the header band, each in a distinct colour."""
    from evaltrace import config
    from outcome_trace import MIXED, record_trace

    browser = chromium()
    try:
        trace_id = record_trace(tmp_path / "store", MIXED)
    finally:
        handle = config.current_handle()
        if handle is not None:
            handle.shutdown()
    page = write_report(trace_id, tmp_path / "outcomes.html", tmp_path / "store")
    shot = tmp_path / "outcomes.png"
    result = run_chromium(browser, tmp_path, f"--screenshot={shot}", page.as_uri())
    assert shot.is_file(), result.stderr[-2000:]
    _, height, rows = decode_png(shot.read_bytes())
    band = [y for y in range(height) if pixel(rows, 5, y) == HEADER_RGB]
    assert band and band[0] == 0, "the header is not at the top"
    header = {pixel(rows, x, y) for y in band for x in range(0, WIDTH, 2)}
    for name, rgb in (("pass", PASS_RGB), ("fail", FAIL_RGB), ("error", ERROR_RGB), ("not evaluated", NEUTRAL_RGB)):
        assert rgb in header, f"no {name} badge in the header"
