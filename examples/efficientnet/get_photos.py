#!/usr/bin/env python3
"""Writes the example's photos into OUTDIR as PNG: sample images that ship inside the scikit-image wheel
(`pip install --no-deps scikit-image`), the very files `skimage.data.chelsea()`, `coffee()`,
`camera()`, ... load. They are copied from the installed package, which is found without importing it (so none
of scikit-image's dependencies are needed).

  chelsea.png          451x300 RGB   Chelsea the cat
  coffee.png           600x400 RGB   a cup of coffee
  motorcycle_left.png  741x500 RGB   a motorcycle (left view of a stereo pair)
  camera.png           512x512 gray  the cameraman (exercises the gray -> RGB path of classify.c)

usage: get_photos.py OUTDIR"""
import importlib.util
import os
import shutil
import sys

PHOTOS = ["chelsea.png", "coffee.png", "motorcycle_left.png", "camera.png"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.rsplit("\n", 1)[-1])
    out = sys.argv[1]
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("get_photos: error: scikit-image is not installed (pip install --no-deps scikit-image)")
    data = os.path.join(list(spec.submodule_search_locations)[0], "data")
    os.makedirs(out, exist_ok=True)
    for name in PHOTOS:
        src = os.path.join(data, name)
        try:
            with open(src, "rb") as f:
                if f.read(8) != PNG_SIGNATURE:
                    sys.exit(f"get_photos: error: {src} is not a PNG file")
        except OSError as e:
            sys.exit(f"get_photos: error: {src}: {e.strerror} (this scikit-image version does not ship it)")
        shutil.copyfile(src, os.path.join(out, name))
    print(f"{out}: {', '.join(PHOTOS)} (from {data})")


if __name__ == "__main__":
    main()
