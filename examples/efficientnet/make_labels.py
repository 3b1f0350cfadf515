#!/usr/bin/env python3
"""Regenerates imagenet_classes.txt, the ImageNet-1k class names in the standard class-index order, from the
files that the timm wheel ships (Apache-2.0, https://pypi.org/project/timm/):

  timm/data/_info/imagenet_synsets.txt          the 1000 WordNet ids, line i = class i
  timm/data/_info/imagenet_synset_to_lemma.txt  WordNet id <TAB> its lemmas ("tabby, tabby cat")

The names are WordNet lemmas (WordNet 3.0 license, Princeton University: free to use, copy and distribute).
The committed file was made from timm 1.0.31:

  pip download --no-deps timm==1.0.31 -d /tmp/timm && python3 make_labels.py /tmp/timm/timm-1.0.31-py3-none-any.whl

usage: make_labels.py TIMM.whl|TIMM_PACKAGE_DIR [OUT (default imagenet_classes.txt)]"""
import os
import sys
import zipfile

# a few well-known indices of the standard order, checked after generation
KNOWN = {0: "tench, Tinca tinca", 207: "golden retriever", 281: "tabby, tabby cat", 285: "Egyptian cat",
         340: "zebra", 504: "coffee mug", 967: "espresso"}


def read(src, name):
    if os.path.isdir(src):
        with open(os.path.join(src, "data", "_info", name), encoding="utf-8") as f:
            return f.read()
    with zipfile.ZipFile(src) as z:
        return z.read("timm/data/_info/" + name).decode("utf-8")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.rsplit("\n", 1)[-1])
    src = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "imagenet_classes.txt")
    synsets = read(src, "imagenet_synsets.txt").split()
    lemmas = dict(line.split("\t", 1) for line in read(src, "imagenet_synset_to_lemma.txt").splitlines() if line)
    if len(synsets) != 1000 or len(set(synsets)) != 1000:
        sys.exit(f"make_labels: error: {len(synsets)} synsets, 1000 distinct expected")
    names = [lemmas[s].strip() for s in synsets]
    for i, name in KNOWN.items():
        if names[i] != name:
            sys.exit(f"make_labels: error: class {i} is {names[i]!r}, expected {name!r}")
    with open(out, "w", encoding="utf-8") as f:
        f.write("".join(n + "\n" for n in names))
    print(f"{out}: {len(names)} class names")


if __name__ == "__main__":
    main()
