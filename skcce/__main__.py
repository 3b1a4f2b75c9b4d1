"""``python -m skcce`` runs the ``skcce`` command line."""

import sys

from skcce.cli import main

sys.exit(main())
