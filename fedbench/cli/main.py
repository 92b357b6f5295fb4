"""The `fedbench` command: every entry point under one name.

    fedbench run experiment=daily_densenet        = python -m fedbench experiment=daily_densenet
    fedbench bench device=rpi4 model=lenet ...     = python -m fedbench.bench ...
    fedbench analyze multirun/2025-01-01/12-00-00  = python -m fedbench.analyze ...
    fedbench fleet describe fleet=phones_100       = python -m fedbench.fleet describe ...

Each subcommand is the module's own `main`, given the rest of the command
line, so the two spellings cannot drift apart. `fedbench key=value ...`
(no subcommand) is `fedbench run key=value ...`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from fedbench.errors import closest

# subcommand -> (module whose `main` runs it, what it does)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("fedbench.__main__", "run an experiment (Hydra: group=option key.path=value, -m)"),
    "analyze": ("fedbench.analyze.cli", "figures and tables of run and sweep folders"),
    "bench": ("fedbench.bench", "what one model's training costs on emulated devices"),
    "characterize": ("fedbench.characterize.cli", "papers 000-002's characterisation studies"),
    "device": ("fedbench.device", "join a deployment as a physical device"),
    "fleet": ("fedbench.fleet", "a fleet's drawn population (fleet describe ...)"),
    "profile": ("fedbench.profile_device", "profile this device into a profile YAML"),
    "security": ("fedbench.security", "a private CA and server certificate (issue-tls)"),
}


def overview() -> str:
    rows = [f"  {name:<13} {what}" for name, (_, what) in COMMANDS.items()]
    return "\n".join(
        [
            "usage: fedbench <command> [key=value ...]    (fedbench <command> --help for its keys)",
            "",
            "commands:",
            *rows,
            "",
            "fedbench key=value ... is fedbench run key=value ...; every command is also",
            "python -m <module> (python -m fedbench for run).",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(overview())
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        if "=" in command or command.startswith("-"):  # overrides: a run
            command, rest = "run", args
        else:
            print(
                f"fedbench: error: unknown command {command!r}{closest(command, COMMANDS)}; "
                f"valid: {', '.join(COMMANDS)}",
                file=sys.stderr,
            )
            return 2
    module = importlib.import_module(COMMANDS[command][0])
    if command == "run":
        # Hydra reads sys.argv itself; its program name stays `fedbench`.
        sys.argv = [sys.argv[0], *rest]
        module.main()
        return 0
    return int(module.main(rest))


if __name__ == "__main__":
    sys.exit(main())
