"""``python -m mapush``: the same entry point as the ``mapush`` console script."""
import sys

from mapush.cli import main

sys.exit(main())
