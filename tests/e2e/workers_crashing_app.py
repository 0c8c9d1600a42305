"""An application that cannot start: every worker exits as it loads it."""

raise RuntimeError("this application cannot start")
