"""``python -m cli ...`` runs the ``changelake`` command line (as the console script does)."""

import sys

from cli.main import main

sys.exit(main())
