"""`python -m fedbench.analyze PATH... [key=value ...]`: see fedbench/analyze/cli.py."""

from __future__ import annotations

import sys

from fedbench.analyze.cli import main

if __name__ == "__main__":
    sys.exit(main())
