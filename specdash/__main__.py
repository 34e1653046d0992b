"""`python -m specdash` delegates to the CLI."""

from specdash.cli import main

raise SystemExit(main())
