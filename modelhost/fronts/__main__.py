"""`python -m modelhost.fronts`: one front process (front.py)."""

import sys

from modelhost.fronts.front import main

sys.exit(main(sys.argv[1:]))
