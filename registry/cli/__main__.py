"""``python -m registry.cli``: the ``acp-registry`` command."""

from registry.cli import main

raise SystemExit(main())
