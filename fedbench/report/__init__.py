"""Round records, result files and plots."""
