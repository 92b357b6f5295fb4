"""Profiling the device fedbench runs on.

What it is (describe.py), how fast it trains (bench.py), and the device
profile fitted to those timings (fit.py).
"""
