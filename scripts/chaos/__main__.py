"""`python3 -m chaos` from scripts/ (what scripts/chaos.sh runs): runs the chaos soak. It
imports `bench` as the package beside it."""

import sys

from chaos.main import main

sys.exit(main())
