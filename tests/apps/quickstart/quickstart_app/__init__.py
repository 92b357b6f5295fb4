"""A plain Flower app (no fedbench imports): the stranger fedbench must run unchanged."""
