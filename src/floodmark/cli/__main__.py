"""``python -m floodmark.cli ...``: the same as the ``floodmark`` console script."""

import sys

from floodmark.cli.main import main

sys.exit(main())
