"""`python -m engine.cli ...` runs hp-plan."""

import sys

from engine.cli import main

if __name__ == "__main__":
    sys.exit(main())
