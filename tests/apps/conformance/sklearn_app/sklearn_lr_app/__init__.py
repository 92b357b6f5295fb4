"""Conformance app: scikit-learn LogisticRegression, parameters exchanged as NumPy arrays."""
