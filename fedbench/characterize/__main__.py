"""`python -m fedbench.characterize study=... device=... [key=value ...]`: see cli.py."""

from __future__ import annotations

import sys

from fedbench.characterize.cli import main

# Guarded: measurement workers are spawned processes that re-import this module.
if __name__ == "__main__":
    sys.exit(main())
