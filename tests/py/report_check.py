#!/usr/bin/env python3
"""Checks `bundlec compile --report FILE.html` on ResNet-50 (CPU only) and MobileNetV2 partitioned for the virtual NPU:
the page is self-contained (no scripts, no external references), parses as HTML with well-formed SVG, has the op
table with one row per kernel (NPU rows for the partitioned model), the memory-plan timeline with one bar per
activation buffer, the partition graph with one box per node, and the timings; then renders it in headless
Chromium (Debian's `chromium`, installed by scripts/setup.sh) and checks the screenshot is not blank.

usage: report_check.py [--bundlec target/debug/bundlec] RESNET50.onnx MOBILENETV2.onnx"""
import argparse, html.parser, os, re, shutil, struct, subprocess, sys, tempfile, zlib
import xml.etree.ElementTree as ET

ap = argparse.ArgumentParser()
ap.add_argument("--bundlec", default="target/debug/bundlec")
ap.add_argument("resnet")
ap.add_argument("mobilenet")
a = ap.parse_args()


def png_pixels(path):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into rows of bytes."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, ul = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + left) & 255
            elif f == 2: line[i] = (line[i] + up) & 255
            elif f == 3: line[i] = (line[i] + (left + up) // 2) & 255
            elif f == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


class Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.refs = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href") and v and not v.startswith("#"):
                self.refs.append(v)


def check(model, name, extra, npu):
    d = tempfile.mkdtemp(prefix="report-")
    out = os.path.join(d, "report.html")
    subprocess.run([a.bundlec, "compile", model, "-o", d, "--name", name, "--report", out] + extra, check=True,
                   capture_output=True)
    inspect = subprocess.run([a.bundlec, "inspect", os.path.join(d, name + ".o"), "--json"], check=True,
                             capture_output=True, text=True).stdout
    import json
    ins = json.loads(inspect)
    page = open(out, encoding="utf-8").read()
    p = Tags()
    p.feed(page)
    errs = []
    if "script" in p.tags or p.refs:
        errs.append(f"not self-contained: scripts {p.tags.count('script')}, references {p.refs[:3]}")
    for sec in ("Compile timings", "Ops", "Memory plan", "Partition"):
        if f"<h2>{sec}</h2>" not in page:
            errs.append(f"section {sec} missing")
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    for s in svgs:
        ET.fromstring(s)  # well-formed SVG
    if len(svgs) != 2:
        errs.append(f"{len(svgs)} SVGs, expected 2")
    ops_table = page.split("<h2>Ops</h2>")[1].split("</table>")[0]
    rows = ops_table.count("<tr") - 1
    if rows != len(ins["ops"]):
        errs.append(f"{rows} op rows, the bundle has {len(ins['ops'])} ops")
    npu_rows = ops_table.count("<tr class=npu>")
    if npu and npu_rows == 0 or not npu and npu_rows:
        errs.append(f"{npu_rows} NPU rows (npu={npu}, segments {len(ins['segments'])})")
    bars = svgs[0].count("<rect") - 1
    if bars < 10:
        errs.append(f"memory timeline has {bars} bars")
    boxes = svgs[1].count("<g>")
    shot = os.path.join(d, "shot.png")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    rendered = "not rendered (no chromium)"
    if browser:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={shot}", "--window-size=1200,2400", "file://" + out],
                       capture_output=True, timeout=120)
        if not os.path.exists(shot):
            errs.append("chromium wrote no screenshot")
        else:
            w, h, bpp, px = png_pixels(shot)
            ink = sum(1 for row in px[::4] for i in range(0, w * bpp, bpp * 4) if row[i] < 200)
            colours = {row[i:i + 3] for row in px[::8] for i in range(0, w * bpp, bpp * 8)}
            rendered = f"screenshot {w}x{h}, {ink} dark samples, {len(colours)} colours"
            if ink < 500 or len(colours) < 8:
                errs.append("the rendered page looks blank: " + rendered)
    status = "FAIL" if errs else "PASS"
    print(f"{status} {name}: {len(page)} B, {rows} op rows ({npu_rows} on the NPU), {bars} memory bars, "
          f"{boxes} graph nodes; {rendered}" + "".join("\n  " + e for e in errs))
    if not errs:
        shutil.rmtree(d)
    return not errs


ok = check(a.resnet, "resnet50", [], False)
ok &= check(a.mobilenet, "mobilenetv2", ["--npu", "vnpu", "--npu-min-gain", "-1"], True)
sys.exit(0 if ok else 1)
