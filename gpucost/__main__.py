from gpucost.cli import main

raise SystemExit(main())
