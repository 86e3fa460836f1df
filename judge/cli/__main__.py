"""``python -m judge.cli ARGS``: the ``judge`` command without the console script."""

import sys

from judge.cli import main

sys.exit(main())
