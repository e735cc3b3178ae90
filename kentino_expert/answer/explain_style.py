"""The explanation page's inline style sheet (no external asset: the page is one self-contained file)."""

CSS = """
:root { color-scheme: light; }
body { font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif; color: #1d2433;
       background: #f4f6fa; margin: 0; }
main { max-width: 1040px; margin: 0 auto; padding: 24px 28px 48px; }
header.answer { background: #16324f; color: #fff; border-radius: 10px; padding: 20px 24px; }
header.answer h1 { margin: 0 0 6px; font-size: 26px; }
header.answer .kind { background: #f2b632; color: #16324f; border-radius: 6px; padding: 1px 10px; }
header.answer p { margin: 6px 0; }
.status { display: inline-block; border-radius: 999px; padding: 1px 12px; font-size: 13px; font-weight: 600; }
.status.final { background: #c9f2d4; color: #0f5b26; } .status.provisional { background: #ffe4b3; color: #7a4b00; }
section { background: #fff; border: 1px solid #dde3ec; border-radius: 10px; padding: 16px 22px; margin-top: 18px; }
h2 { font-size: 19px; margin: 0 0 10px; color: #16324f; }
h3 { font-size: 16px; margin: 0 0 4px; } h3 code { font-size: 15px; }
table { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 14px; }
th, td { text-align: left; border-bottom: 1px solid #e6eaf0; padding: 5px 8px; vertical-align: top; }
th { background: #eef2f7; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; background: #eef2f7; border-radius: 4px;
       padding: 0 4px; }
.decision code { background: rgba(255,255,255,0.15); color: inherit; }
.rule { border-left: 4px solid #3d7bd9; padding: 10px 14px; margin: 12px 0; background: #fbfcfe; border-radius: 6px; }
.where { color: #5b6677; font-size: 13px; }
.yes { color: #0f7a34; font-weight: 600; } .no { color: #b3261e; font-weight: 600; }
blockquote { margin: 8px 0; padding: 6px 12px; border-left: 3px solid #f2b632; background: #fff9ea; }
blockquote .hid { font-weight: 700; }
ul.whynot li, ul.assumptions li, ul.warnings li { margin: 4px 0; }
.warnings li { color: #7a4b00; }
footer { color: #5b6677; font-size: 13px; margin-top: 18px; word-break: break-all; }
figure.chart { margin: 12px 0 20px; break-inside: avoid; page-break-inside: avoid; }
figure.chart svg { display: block; max-width: 100%; height: auto; }
figure.chart figcaption { color: #1d2433; font-size: 14px; margin: 4px 0; }
figure.chart figcaption .source { color: #5b6677; font-size: 13px; }
table.chart-data { font-size: 13px; }
@media print { body { background: #fff; } section, figure.chart { break-inside: avoid; } }
"""
