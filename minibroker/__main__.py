from minibroker.cli import main

raise SystemExit(main())
