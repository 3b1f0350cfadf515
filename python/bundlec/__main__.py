"""`python -m bundlec ...`: the bundlec command line, the same program as the `bundlec` binary."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
