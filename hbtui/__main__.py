from hbtui.cli import main

raise SystemExit(main())
