"""``python -m optfleet``: the same command line as the ``optfleet`` script."""

import sys

from optfleet.cli import main

sys.exit(main())
