"""What fedbench does with input that arrives on the host: run folders, trace files, configs.

A run folder, a trace file or a config on disk may come from someone else
(researchers share them) or be edited by another local account. Opening one
never runs code and never signals a process it does not prove is fedbench's:

- `key`: the per-user secret (outside every run folder) that keys the
  fingerprints fedbench writes into a run folder (HMAC-SHA256), so an edit
  with the fingerprint recomputed is still refused;
- `targets`: the `_target_` allowlist applied to a config loaded from disk
  (`resume=`), checked before anything is imported or called;
- `arguments`: what those classes may be given from disk (no URL, no path
  outside the run folder, no other host);
- `unpickle`: a pickle reader that admits only plain containers and numbers;
- `bounded`: the size and structure caps (bytes, line length, YAML depth and
  aliases) every file from outside passes before it is parsed.

This package is the bottom layer: it imports nothing of fedbench but errors.
"""
