"""`python3 scripts/bench` (or `python3 -m bench` from scripts/): runs the benchmark."""

import sys
from pathlib import Path

if not __package__:  # run as a directory: import the package from its parent, not its modules as top-level ones
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from bench.main import main  # noqa: E402

sys.exit(main())
