"""`python -m gateway` is the same as the `clawgate` command."""

import sys

from gateway.cli.main import main

sys.exit(main())
