"""Command-line plumbing shared by fedbench's entry points."""
