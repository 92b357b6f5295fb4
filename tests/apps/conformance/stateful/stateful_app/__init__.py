"""Conformance app: per-client state kept in context.state across rounds."""
