"""``python -m ampcore``: the same as the ``ampcore`` command."""

import sys

from .cli import main

sys.exit(main())
