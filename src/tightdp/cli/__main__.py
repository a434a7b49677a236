"""``python -m tightdp.cli``: the ``tightdp`` command."""

from . import main

raise SystemExit(main())
