"""`python3 scripts/chaos` (or `python3 -m chaos` from scripts/): runs the chaos soak."""

import sys
from pathlib import Path

if not __package__:  # run as a directory: import the package (and scripts/bench) from scripts/
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from chaos.main import main  # noqa: E402

sys.exit(main())
