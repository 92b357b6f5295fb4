"""Conformance app: SecAgg+ workflow with client-side fixed-clipping central DP."""
