from lineup.cli import main

raise SystemExit(main())
