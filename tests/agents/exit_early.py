"""Early-exit agent: exits at once with EXIT_CODE, without reading stdin or printing anything.

Usage: exit_early.py [EXIT_CODE=0]
"""

from __future__ import annotations

import sys

sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
