"""``python -m probench`` is the ``probench`` command."""

import sys

from probench.cli import main

sys.exit(main())
