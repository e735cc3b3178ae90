"""How wide a chart's text is drawn, and a label wrapped to a width: so that no text is cut or overlaps another."""
from __future__ import annotations

# Advance widths of the printable ASCII characters (space to ~) in thousandths of the font size, read from
# DejaVu Sans and DejaVu Sans Bold, the font the charts name first and among the widest a browser falls back
# to: a text measured here is at most as wide where it is drawn. Any other character counts as one em.
_REGULAR = (
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632,
    575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635, 611, 732, 684, 989, 685,
    611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579,
    278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838,
)
_BOLD = (
    348, 456, 521, 838, 696, 1002, 872, 306, 457, 457, 523, 838, 380, 415, 380, 365, 696, 696, 696,
    696, 696, 696, 696, 696, 696, 696, 400, 400, 838, 838, 838, 580, 1000, 774, 762, 734, 830, 683,
    683, 821, 837, 372, 372, 775, 637, 995, 837, 850, 733, 850, 770, 720, 682, 812, 774, 1103, 771,
    724, 725, 457, 365, 457, 838, 500, 500, 675, 716, 593, 716, 678, 435, 716, 712, 343, 343, 665,
    343, 1042, 712, 687, 716, 716, 493, 595, 478, 712, 652, 924, 645, 652, 582, 712, 365, 712, 838,
)


def text_width(text: str, size: float = 12, bold: bool = False) -> float:
    """The width of `text` drawn at `size` pixels, at most (see _REGULAR)."""
    table = _BOLD if bold else _REGULAR
    total = sum(table[ord(char) - 32] if 32 <= ord(char) < 127 else 1000 for char in text)
    return total * size / 1000


def wrapped(text: str, width: float, size: float = 12, bold: bool = False) -> list[str]:
    """`text` in lines no wider than `width`, broken between words (a word wider than a line, between its
    characters): every character is kept."""
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if text_width(candidate, size, bold) <= width:
            line = candidate
            continue
        if line:
            lines.append(line)
        line = ""
        for char in word:  # a word wider than a line: broken between its characters
            if line and text_width(line + char, size, bold) > width:
                lines.append(line)
                line = ""
            line += char
    return lines + [line] if line or not lines else lines
