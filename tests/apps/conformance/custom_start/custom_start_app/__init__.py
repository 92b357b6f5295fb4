"""Conformance app: a FedAvg subclass that overrides start() (lr schedule, results.json)."""
