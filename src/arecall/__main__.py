from arecall.cli import main

raise SystemExit(main())
