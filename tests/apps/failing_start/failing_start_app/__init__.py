"""A Flower app whose ServerApp raises at start (tests of fedbench's error path)."""
