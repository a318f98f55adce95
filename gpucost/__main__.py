"""`python -m gpucost`: the command line."""

from gpucost.cli import main

raise SystemExit(main())
