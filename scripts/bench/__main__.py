"""`python3 -m bench` from scripts/ (what scripts/bench.sh runs): runs the benchmark."""

import sys

from bench.main import main

sys.exit(main())
