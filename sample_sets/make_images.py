"""Draw the small PNG charts, receipts and tables used by sample_sets/images.jsonl.

Pure Python on purpose (a zlib + struct PNG encoder and a 5x7 bitmap font),
so the images are reproducible byte for byte with no imaging library:

    python sample_sets/make_images.py [OUT_DIR]     # default: sample_sets/images

The numbers drawn here are the answers the cases' checks look for; change
both together.
"""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

WHITE = (255, 255, 255)
BLACK = (20, 20, 20)
GREY = (170, 170, 170)
LIGHT = (228, 228, 228)
BLUE = (50, 100, 190)
ORANGE = (225, 120, 30)

_GLYPHS = {
    "0": ".###. #...# #..## #.#.# ##..# #...# .###.",
    "1": "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    "2": ".###. #...# ....# ...#. ..#.. .#... #####",
    "3": "##### ...#. ..#.. ...#. ....# #...# .###.",
    "4": "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    "5": "##### #.... ####. ....# ....# #...# .###.",
    "6": "..##. .#... #.... ####. #...# #...# .###.",
    "7": "##### ....# ...#. ..#.. .#... .#... .#...",
    "8": ".###. #...# #...# .###. #...# #...# .###.",
    "9": ".###. #...# #...# .#### ....# ...#. .##..",
    "A": ".###. #...# #...# ##### #...# #...# #...#",
    "B": "####. #...# #...# ####. #...# #...# ####.",
    "C": ".###. #...# #.... #.... #.... #...# .###.",
    "D": "###.. #..#. #...# #...# #...# #..#. ###..",
    "E": "##### #.... #.... ####. #.... #.... #####",
    "F": "##### #.... #.... ####. #.... #.... #....",
    "G": ".###. #...# #.... #.### #...# #...# .####",
    "H": "#...# #...# #...# ##### #...# #...# #...#",
    "I": ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "J": "..### ...#. ...#. ...#. ...#. #..#. .##..",
    "K": "#...# #..#. #.#.. ##... #.#.. #..#. #...#",
    "L": "#.... #.... #.... #.... #.... #.... #####",
    "M": "#...# ##.## #.#.# #.#.# #...# #...# #...#",
    "N": "#...# #...# ##..# #.#.# #..## #...# #...#",
    "O": ".###. #...# #...# #...# #...# #...# .###.",
    "P": "####. #...# #...# ####. #.... #.... #....",
    "Q": ".###. #...# #...# #...# #.#.# #..#. .##.#",
    "R": "####. #...# #...# ####. #.#.. #..#. #...#",
    "S": ".#### #.... #.... .###. ....# ....# ####.",
    "T": "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "U": "#...# #...# #...# #...# #...# #...# .###.",
    "V": "#...# #...# #...# #...# #...# .#.#. ..#..",
    "W": "#...# #...# #...# #.#.# #.#.# #.#.# .#.#.",
    "X": "#...# #...# .#.#. ..#.. .#.#. #...# #...#",
    "Y": "#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..",
    "Z": "##### ....# ...#. ..#.. .#... #.... #####",
    " ": "..... ..... ..... ..... ..... ..... .....",
    ".": "..... ..... ..... ..... ..... .##.. .##..",
    ",": "..... ..... ..... ..... .##.. ..#.. .#...",
    ":": "..... .##.. .##.. ..... .##.. .##.. .....",
    "$": "..#.. .#### #.#.. .###. ..#.# ####. ..#..",
    "-": "..... ..... ..... ##### ..... ..... .....",
    "%": "##... ##..# ...#. ..#.. .#... #..## ...##",
    "/": "..... ....# ...#. ..#.. .#... #.... .....",
    "(": "...#. ..#.. .#... .#... .#... ..#.. ...#.",
    ")": ".#... ..#.. ...#. ...#. ...#. ..#.. .#...",
    "#": ".#.#. .#.#. ##### .#.#. ##### .#.#. .#.#.",
    "+": "..... ..#.. ..#.. ##### ..#.. ..#.. .....",
    "=": "..... ..... ##### ..... ##### ..... .....",
    "'": "..#.. ..#.. .#... ..... ..... ..... .....",
}
_FONT = {ch: [row for row in rows.split()] for ch, rows in _GLYPHS.items()}


class Canvas:
    """An RGB pixel buffer with just enough drawing for bars, lines and text."""

    def __init__(self, width: int, height: int, background: tuple[int, int, int] = WHITE) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def rect(self, x: int, y: int, w: int, h: int, color: tuple[int, int, int]) -> None:
        x0, y0 = max(0, x), max(0, y)
        x1, y1 = min(self.width, x + w), min(self.height, y + h)
        if x1 <= x0 or y1 <= y0:
            return
        row = bytes(color) * (x1 - x0)
        for yy in range(y0, y1):
            start = (yy * self.width + x0) * 3
            self.pixels[start:start + len(row)] = row

    def text(self, x: int, y: int, text: str, scale: int = 2, color: tuple[int, int, int] = BLACK) -> int:
        """Draw upper-cased text; returns the x after the last glyph."""
        for ch in text.upper():
            glyph = _FONT.get(ch, _FONT[" "])
            for gy, row in enumerate(glyph):
                for gx, bit in enumerate(row):
                    if bit == "#":
                        self.rect(x + gx * scale, y + gy * scale, scale, scale, color)
            x += 6 * scale
        return x

    @staticmethod
    def text_width(text: str, scale: int = 2) -> int:
        return len(text) * 6 * scale - scale

    def png(self) -> bytes:
        raw = bytearray()
        stride = self.width * 3
        for y in range(self.height):
            raw.append(0)  # filter: none
            raw += self.pixels[y * stride:(y + 1) * stride]

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b"")


def quarterly_bar_chart() -> Canvas:
    values = [("Q1", 120), ("Q2", 185), ("Q3", 95), ("Q4", 240)]
    c = Canvas(420, 300)
    c.text(20, 14, "UNITS SOLD PER QUARTER 2024", 2)
    base_y, left = 260, 50
    c.rect(left - 2, 50, 2, base_y - 50, BLACK)
    c.rect(left - 2, base_y, 360, 2, BLACK)
    for tick in (50, 100, 150, 200, 250):
        ty = base_y - int(tick * 0.8)
        c.rect(left, ty, 350, 1, LIGHT)
        c.text(8, ty - 5, str(tick), 1)
    for i, (label, value) in enumerate(values):
        x = left + 25 + i * 85
        h = int(value * 0.8)
        c.rect(x, base_y - h, 50, h, BLUE)
        c.text(x + (50 - c.text_width(str(value))) // 2, base_y - h - 20, str(value), 2)
        c.text(x + (50 - c.text_width(label)) // 2, base_y + 10, label, 2)
    return c


def survey_hbar_chart() -> Canvas:
    values = [("EMAIL", 38), ("CHAT", 27), ("PHONE", 22), ("OTHER", 9), ("LETTER", 4)]
    c = Canvas(440, 250)
    c.text(16, 14, "PREFERRED CONTACT CHANNEL", 2)
    c.text(16, 36, "SURVEY OF 400 CUSTOMERS, MARCH 2024", 1)
    for i, (label, pct) in enumerate(values):
        y = 62 + i * 36
        c.text(16, y + 6, label, 2)
        w = pct * 7
        c.rect(110, y, w, 24, ORANGE)
        c.text(110 + w + 8, y + 6, f"{pct}%", 2)
    return c


def receipt(lines: list[tuple[str, str]], title: str, footer: str) -> Canvas:
    height = 70 + 22 * len(lines) + 40
    c = Canvas(330, height)
    c.text((330 - c.text_width(title)) // 2, 14, title, 2)
    y = 48
    for left, right in lines:
        if left == "---":
            c.rect(16, y + 6, 298, 2, GREY)
        else:
            c.text(16, y, left, 2)
            c.text(314 - c.text_width(right), y, right, 2)
        y += 22
    c.text((330 - c.text_width(footer, 1)) // 2, y + 14, footer, 1)
    return c


def cafe_receipt() -> Canvas:
    return receipt([
        ("2 X LATTE", "9.00"),
        ("1 X BAGEL", "3.25"),
        ("3 X COOKIE", "5.40"),
        ("---", ""),
        ("SUBTOTAL", "17.65"),
        ("TAX 8%", "1.41"),
        ("TOTAL", "19.06"),
        ("PAID CARD", "19.06"),
    ], "CORNER CAFE", "12/03/2024 08:41  TABLE 7")


def hardware_receipt() -> Canvas:
    # Planted error: the items add up to 41.35, the receipt says 43.35.
    return receipt([
        ("4 X HINGE", "11.96"),
        ("1 X DRILL BIT SET", "18.50"),
        ("2 X WOOD GLUE", "10.89"),
        ("---", ""),
        ("TOTAL", "43.35"),
    ], "BOLT + BEAM HARDWARE", "INVOICE 2291  02/05/2024")


def city_temperature_table() -> Canvas:
    rows = [("CITY", "JAN", "JUL"), ("OSLO", "-4", "17"), ("MADRID", "6", "26"), ("CAIRO", "14", "29"),
            ("SYDNEY", "23", "13"), ("DENVER", "-1", "24")]
    col_x = [16, 180, 280]
    c = Canvas(380, 60 + 34 * len(rows))
    c.text(16, 12, "MEAN TEMPERATURE (C)", 2)
    top = 44
    for r, row in enumerate(rows):
        y = top + r * 34
        if r == 0:
            c.rect(10, y - 6, 360, 32, LIGHT)
        for x, cell in zip(col_x, row, strict=True):
            c.text(x, y + 4, cell, 2)
        c.rect(10, y + 26, 360, 1, GREY)
    for x in (170, 270):
        c.rect(x, top - 6, 1, 34 * len(rows), GREY)
    return c


def invoice_document() -> Canvas:
    lines = [
        ("INVOICE NO. 4471", 2),
        ("", 1),
        ("FROM: NORTHWIND PRINTING LTD", 1),
        ("TO: HALVORSEN DESIGN STUDIO", 1),
        ("ISSUED: 2024-02-14", 1),
        ("DUE: 2024-03-15", 1),
        ("", 1),
        ("500 X BUSINESS CARDS      90.00", 1),
        ("200 X A5 FLYERS          160.00", 1),
        ("1 X POSTER A1             45.00", 1),
        ("", 1),
        ("NET                      295.00", 1),
        ("VAT 20%                   59.00", 1),
        ("TOTAL DUE (EUR)          354.00", 1),
    ]
    c = Canvas(340, 250)
    y = 14
    for text, scale in lines:
        if text:
            c.text(16, y, text, scale if scale == 2 else 1)
        y += 24 if scale == 2 else 14
    return c


def shipments_note() -> Canvas:
    """A short note in large text: four weekly counts to add up."""
    c = Canvas(400, 160)
    c.text(16, 14, "SHIPMENTS DELAYED", 2)
    for i, (wk, n) in enumerate([("WEEK 1", "3"), ("WEEK 2", "11"), ("WEEK 3", "7"), ("WEEK 4", "2")]):
        c.text(16 + (i % 2) * 190, 50 + (i // 2) * 40, f"{wk}: {n}", 2)
    return c


IMAGES = {
    "chart-quarterly-units.png": quarterly_bar_chart,
    "chart-contact-survey.png": survey_hbar_chart,
    "receipt-corner-cafe.png": cafe_receipt,
    "receipt-hardware.png": hardware_receipt,
    "table-city-temperatures.png": city_temperature_table,
    "invoice-4471.png": invoice_document,
    "note-shipments-delayed.png": shipments_note,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else Path(__file__).resolve().parent / "images"
    out.mkdir(parents=True, exist_ok=True)
    for name, draw in IMAGES.items():
        (out / name).write_bytes(draw().png())
    print(f"wrote {len(IMAGES)} images to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
