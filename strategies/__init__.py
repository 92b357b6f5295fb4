"""Device-selection strategies, one per file (configs name `_target_: strategies.x.X`)."""
