"""Conformance suite: real Flower apps and their reference metrics under plain Flower."""
