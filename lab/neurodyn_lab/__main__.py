"""``python -m neurodyn_lab``: the laboratory's command line (:mod:`neurodyn_lab.cli`)."""

import sys

from neurodyn_lab.cli import main

sys.exit(main())
