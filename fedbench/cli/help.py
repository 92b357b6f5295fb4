"""`python -m fedbench --help`: fedbench's config groups, their options and examples.

Hydra's stock help lists every folder under fedbench/conf/ (including the
`characterize` studies, which the main command cannot use) and says
"powered by Hydra". fedbench/conf/hydra/help/fedbench.yaml replaces it with a
template that calls the resolver registered here: the groups are the ones
fedbench/conf/config.yaml's defaults list composes, their options the YAMLs in each
group's folder, so a new group or option shows up without editing the help.
Hydra then appends the composed config ($CONFIG) as the list of keys and
their values.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from fedbench.paths import conf_dir

RESOLVER = "fedbench.help"

# One line per group of fedbench/conf/config.yaml; tests/cli/test_main_help.py fails
# when a group in the defaults list has none here.
GROUP_HELP: dict[str, str] = {
    "data": "data source, splits and partitioning (data.partition.scheme: a flwr-datasets one)",
    "model": "the network, built with _target_ (default: the one the data is fitted to)",
    "fleet": "the devices: groups of {profile, count}; +fleet.scale=N resizes keeping the mix",
    "strategy": "device selection, one file per strategy in strategies/",
    "scenario": "round schedule and each device's data (daily fine-tuning, plain rounds)",
    "train": "local training: batch size, epochs, learning rate, optimizer, memory planner",
    "runtime": "Flower's simulation engine on Ray, or a real SuperLink + SuperNodes",
    "report": "what a run writes besides rounds.csv and summary.json (plots, loggers)",
    "experiment": "a recipe composing the groups above (none by default)",
    "algorithm": "the server's aggregation algorithm",
    "round_close": "when the server closes a round (all replies, first k, deadline)",
    "defense": "what keeps a hostile reply out of the aggregate (bounds on updates and costs)",
    "mode": "synchronous rounds, or FedBuff's buffered asynchronous updates on the clock",
    "hooks": "what runs around each round (records, progress, checkpoints; stop at a target)",
}
TOP_LEVEL_HELP: dict[str, str] = {
    "seed": "seeds data splits, partitions, selection and training",
    "resume": "a run folder to continue from its last complete round",
    "allow_targets": "modules a resumed folder's config may name in _target_ (docs/security.md)",
    "resume_untrusted": "resume a checkpoint this account's key cannot verify (content checked)",
    "resume_any_commit": "resume a folder another fedbench commit made, with this code",
    "verbose": "show Flower's and Ray's logs on the console (always in flower.log)",
    "dry_run": "check everything and print what would run; no run folder, no processes",
}
EXAMPLES = (
    "python -m fedbench experiment=daily_densenet",
    "python -m fedbench experiment=smoke fleet=mixed8 strategy=oort",
    "python -m fedbench experiment=daily_densenet scenario.days=5 train.batch_size=32",
    "python -m fedbench -m experiment=study_daily strategy=random,oort seed=0,1,2",
    "python -m fedbench experiment=smoke report.loggers=[tensorboard]",
)
OTHER_COMMANDS = (
    ("fedbench.analyze", "figures and tables of run and sweep folders"),
    ("fedbench.bench", "what one model costs on emulated devices"),
    ("fedbench.characterize", "papers 000-002's characterisation studies"),
    ("fedbench.device", "join a deployment as a physical device"),
    ("fedbench.fleet", "describe: a fleet's drawn population, printed and plotted"),
    ("fedbench.profile_device", "profile this device into a profile YAML"),
    ("fedbench.security", "issue-tls: a private CA and SuperLink certificate"),
)


def main_config() -> dict[str, object]:
    data = yaml.safe_load((conf_dir() / "config.yaml").read_text())
    return data if isinstance(data, dict) else {}


def groups(config: dict[str, object] | None = None) -> dict[str, str | None]:
    """Group -> default option, for every group the main config's defaults list composes."""
    out: dict[str, str | None] = {}
    defaults = (config or main_config()).get("defaults") or []
    for entry in defaults if isinstance(defaults, list) else []:
        if not isinstance(entry, dict):
            continue  # _self_
        for name, option in entry.items():
            name = str(name)
            if " " in name or name.startswith(("hydra", "/hydra")):
                continue  # `override hydra/...`: Hydra's own settings
            if name == FITTED_GROUP:
                # data_model: ${data} picks the model group's default (data_model/<data>.yaml).
                out["model"] = _fitted_model(out.get("data"))
                continue
            out[name.lstrip("/")] = None if option is None else str(option)
    return out


FITTED_GROUP = "data_model"


def _fitted_model(data: str | None) -> str | None:
    """The model the default data set's data_model/<data>.yaml chooses."""
    path = conf_dir() / FITTED_GROUP / f"{data}.yaml"
    if data is None or not path.is_file():
        return None
    loaded = yaml.safe_load(path.read_text()) or {}
    for entry in loaded.get("defaults") or []:
        if isinstance(entry, dict) and "/model@model" in entry:
            return str(entry["/model@model"])
    return None


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


def describe(path: Path, width: int = 72) -> str:
    """A YAML's opening comment without its command line, shortened to `width`."""
    words: list[str] = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("# ").strip()
        if not text.startswith(("python ", "@package")):
            words.append(text)
    joined = " ".join(words)
    if len(joined) <= width:
        return joined
    return joined[: joined.rfind(" ", 0, width - 4)] + " ..."


def text() -> str:
    config = main_config()
    out = [
        "fedbench: federated and on-device learning on heterogeneous edge devices",
        "",
        "usage: python -m fedbench [group=option ...] [key.path=value ...]  (= fedbench run ...)",
        "       python -m fedbench -m key=a,b ...   a sweep: one run per combination",
        "",
        "Config groups (group=option; * = the default):",
    ]
    for group, default in groups(config).items():
        out.append(f"  {group:<12} {GROUP_HELP.get(group, '')}")
        names = options(group)
        if group == "experiment":  # recipes: what each one is matters more than its name
            for name in names:
                path = conf_dir() / group / f"{name}.yaml"
                out.append(f"      {name:<18} {describe(path)}")
            continue
        marked = ", ".join(f"{n}*" if n == default else n for n in names)
        out.append(textwrap.fill(marked, 96, initial_indent=" " * 6, subsequent_indent=" " * 6))
    out += ["", "Top-level keys (key=default):"]
    for key, value in config.items():
        if key not in ("defaults", "hydra"):
            setting = f"{key}={_yaml_scalar(value)}"
            out.append(f"  {setting:<18} {TOP_LEVEL_HELP.get(str(key), '')}")
    out += ["", "Examples:", *(f"  {e}" for e in EXAMPLES)]
    out += [
        "",
        "A run writes outputs/<date>/<time>/ (or hydra.run.dir=...): rounds.csv, summary.json,",
        "figures/, rounds_summary.csv, console.log; docs/results.md explains every column.",
        "",
        "Other commands (each takes key=value and --help; also `fedbench <name> ...`):",
        *(f"  python -m {m:<26} {what}" for m, what in OTHER_COMMANDS),
        "Hydra's own options: python -m fedbench --hydra-help",
    ]
    # Hydra substitutes $NAME in the template afterwards: a literal $ must be doubled.
    return "\n".join(out).replace("$", "$$")


def _yaml_scalar(value: object) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    return str(value)


def register() -> None:
    """Make `${fedbench.help:}` available to fedbench/conf/hydra/help/fedbench.yaml."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, text)
