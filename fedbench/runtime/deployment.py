"""runtime=deployment: a real Flower SuperLink, local SuperNodes and physical devices.

One run, in order:

1. whatever a previous, killed run of this folder left running is swept
   (`logs/processes.csv`, fedbench.runtime.processes);
2. credentials: the public TLS certificate (a test CA issued into
   `<run>/credentials/`, or the user's `tls_*` files), an internal CA and
   certificate for the SuperLink on 127.0.0.1, a generated SuperExec
   secret, and one node key per emulated device; the public keys of
   physical devices come from `physical_keys` (issued on each device by
   `python -m fedbench.device issue-credentials`);
3. a SuperLink with TLS and SuperNode authentication on, bound to
   127.0.0.1 only; a SuperExec holding the secret, the only process that may
   take the ServerApp task; and on `address:port` the Fleet-only proxy
   (fedbench.runtime.proxy): the Control API (apps, keys, runs) and the
   Runtime API cannot be reached from the network at all. fedbench alone
   registers node keys, through the Control API on 127.0.0.1;
4. one SuperNode per emulated device (fedbench.runtime.nodes), pinned to
   min(its cores, host cores) CPUs and capped at its training budget;
5. wait until every local node is online, and the fleet's physical slots
   (`profile: physical`) are filled by devices that joined, or fail with
   how many did;
6. `flwr run`: the ServerApp gets the experiment as its run config; its
   `[fedbench]` progress lines are streamed to the console, everything in
   `<run>/logs/server.log`;
7. whatever happens (failure, Ctrl-C, SIGTERM), every process started -
   and every helper those started - is stopped by PID; on SIGKILL of
   fedbench the kernel ends them (processes.py).

A device's seat is the one its key was registered for
(`credentials/registered.csv`); a physical device must announce the name
its key was issued for (`python -m fedbench.device name=`), or its replies
are refused. Nodes with unregistered keys are refused by the SuperLink,
requests other than the Fleet API's by the proxy; both are copied to
`<run>/refused.log`.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from flwr.serverapp import Grid

from fedbench.core import interrupt
from fedbench.core.device import DeviceSpec
from fedbench.core.seating import Seating
from fedbench.errors import FedbenchError
from fedbench.experiment.codec import to_json
from fedbench.experiment.fleet import expand_fleet
from fedbench.experiment.schema import Experiment
from fedbench.report.interrupted import mark_interrupted
from fedbench.report.progress import PREFIX, WARNING, console
from fedbench.report.writer import SUMMARY_JSON
from fedbench.runtime.base import Apps, Runtime
from fedbench.runtime.bundle import write_bundle
from fedbench.runtime.flower import (
    ACTIVATED,
    DEACTIVATED,
    REFUSED,
    RUN_STARTED,
    FlowerCli,
    free_port,
    superexec_argv,
    superlink_argv,
    write_run_config,
)
from fedbench.runtime.limits import (
    ARENA_ENV,
    FLOWER_HEADROOM_MB,
    MEMORY_MODES,
    idle_address_space_mb,
    remove_cgroup,
)
from fedbench.runtime.nodes import LocalNode, physical, plan_nodes, write_observed_limits
from fedbench.runtime.processes import (
    ProcessSet,
    Started,
    sweep,
    wait_alive,
)
from fedbench.runtime.proxy import PROXIES, REFUSED_REQUESTS, Gate, choose
from fedbench.runtime.proxy import argv as proxy_argv
from fedbench.runtime.seating import FixedSeating, wait_for_nodes
from fedbench.runtime.superlink import OTHER_ACCOUNT
from fedbench.runtime.superlink import REFUSED_MARK as CONTROL_REFUSED
from fedbench.security import TlsFiles, issue_secret, issue_tls, read_public_key
from fedbench.train.accelerator import ACCELERATOR_ENV, check_host
from fedbench.trust import bounded

LOCAL_NAMES = ("127.0.0.1", "localhost")
_PROTOBUF = {"content-type": "application/protobuf", "accept": "application/protobuf"}
TLS_KEYS = ("tls_ca_cert", "tls_server_cert", "tls_server_key")
SERVERAPP = "flwr-serverapp"  # the process the ServerApp runs in (a role's last word)


def one_or_many(value: object, key: str, what: str) -> tuple[str, ...]:
    """A list key that also takes one value: `key=a.pub` is `[a.pub]`, never its characters.

    On the command line one value is a string and several a list; a string
    iterated as a list would be one "key file" per character. Anything else
    (a number, a mapping) is refused naming the key.
    """
    if value is None:
        return ()
    if isinstance(value, str | Path):
        return (str(value),) if str(value).strip() else ()
    if isinstance(value, Sequence) and all(isinstance(v, str | Path) for v in value):
        return tuple(str(v) for v in value)
    raise FedbenchError(f"{key}={value!r}: {what}, or a list of them, e.g. {key}=[A,B]")


@dataclass(frozen=True)
class DeploymentRuntime(Runtime):
    address: str = "127.0.0.1"  # where the SuperLink listens (0.0.0.0: every interface)
    port: int | None = None  # None: a free port
    advertise: Sequence[str] = ()  # host names / IPs devices dial (in the generated cert)
    # The SuperLink's certificates (PEM paths), all three or none (None: issue a test CA).
    tls_ca_cert: str | None = None
    tls_server_cert: str | None = None
    tls_server_key: str | None = None
    physical_keys: Sequence[str] = ()  # public keys (.pub) of the physical devices
    wait_for_physical_s: float = 600.0
    memory_limit: str = "auto"  # auto | cgroup | rlimit | none
    # Each call of an emulated device in a process of its own under the device's threads,
    # CPUs and training budget (fedbench.client.caps), inside its node's limits.
    enforce_caps: bool = True
    address_space_headroom_mb: int | None = None  # None: measured idle client + Flower
    client_cpus: int = 1
    server_threads: int = 1
    wait_for_nodes_s: float = 120.0
    round_timeout_s: float = 3600.0
    proxy: str = "auto"  # auto (nginx if installed, else python) | nginx | python
    # Where the local SuperNodes train: auto | cpu | cuda | cuda:N (fedbench.train.accelerator).
    accelerator: str = "auto"

    def __post_init__(self) -> None:
        advertise = one_or_many(self.advertise, "runtime.advertise", "a host name or IP address")
        object.__setattr__(self, "advertise", advertise)
        keys = one_or_many(self.physical_keys, "runtime.physical_keys", "a public key file (.pub)")
        object.__setattr__(self, "physical_keys", keys)
        given = [k for k in TLS_KEYS if getattr(self, k) is not None]
        if given and len(given) != len(TLS_KEYS):
            missing = sorted(set(TLS_KEYS) - set(given))
            raise FedbenchError(
                f"runtime.{given[0]} is set but runtime.{', runtime.'.join(missing)} is not: "
                "give all three TLS files, or none to issue a test CA"
            )
        if self.memory_limit not in MEMORY_MODES:
            raise FedbenchError(
                f"runtime.memory_limit={self.memory_limit!r}; valid: {', '.join(MEMORY_MODES)}"
            )
        if self.port is not None and (
            isinstance(self.port, bool)
            or not isinstance(self.port, int)
            or not 1 <= self.port <= 65535
        ):
            raise FedbenchError(f"runtime.port={self.port!r}: expected 1-65535 or null")
        if self.proxy not in PROXIES:
            raise FedbenchError(f"runtime.proxy={self.proxy!r}; valid: {', '.join(PROXIES)}")
        self.check_common()
        self.check_accelerator()

    wall_clock = True  # physical devices reply when they reply

    def preflight(self, experiment: Experiment) -> None:
        self.check_local_cpus()
        check_host(self.accelerator, "runtime.accelerator")
        choose(self.proxy)
        check_address(self.address)
        if self.port is not None:
            check_port_free(self.address, int(self.port))
        if self.tls_ca_cert is not None:
            self._given_tls().check()  # before the run folder, not as the proxy's exit code

    def announced_names(self, run_dir: Path) -> dict[str, str]:
        """Physical seat -> the name of the key registered for it (what the device announces)."""
        return {device: name for device, (_, kind, name) in _registered(run_dir).items() if kind}

    def seating(self, grid: Grid, experiment: Experiment, run_dir: Path) -> Seating:
        """Each device on the node registered with its key (credentials/registered.csv)."""
        devices = expand_fleet(experiment.fleet)
        node_of_name = registered_nodes(run_dir)
        missing = [d.name for d in devices if d.name not in node_of_name]
        if missing:
            raise FedbenchError(f"no registered node for device(s) {', '.join(missing[:5])}")
        node_of = {d.index: node_of_name[d.name] for d in devices}
        wait_for_nodes(grid, len(node_of), self.wait_for_nodes_s)
        return FixedSeating(node_of)

    # -- the run ---------------------------------------------------------------

    def run(self, experiment: Experiment, run_dir: Path, apps: Apps) -> None:
        # The nodes and the SuperExec load the apps from the bundle, by name (bundle.py).
        verbose = experiment.verbose
        devices = expand_fleet(experiment.fleet)
        slots = physical(devices)
        keys = [Path(k).expanduser().resolve() for k in self.physical_keys]
        if len(keys) < len(slots):
            raise FedbenchError(
                f"fleet has {len(slots)} physical device(s) but runtime.physical_keys lists "
                f"{len(keys)} public key(s); issue one per device with "
                "`python -m fedbench.device issue-credentials out=DIR name=NAME`"
            )
        if len(set(keys)) != len(keys):
            raise FedbenchError(
                f"runtime.physical_keys lists a key twice: {list(self.physical_keys)}"
            )
        for key in keys:
            read_public_key(key)
        record = run_dir / "logs" / "processes.csv"
        swept = sweep(record)
        if swept.killed:
            _progress(f"deployment: stopped what a killed run of this folder left: {swept.killed}")
        for refused in swept.refused:
            console.warn(f"deployment: did not signal what {record} names: {refused}")
        _rotate(run_dir / "logs" / "superlink.log")
        procs = ProcessSet(record=record)
        nodes: list[LocalNode] = []
        interrupted = False
        # Measuring an idle client (for RLIMIT_AS) takes seconds: overlap it
        # with the SuperLink's start-up.
        pool = ThreadPoolExecutor(max_workers=1)
        headroom = pool.submit(self._headroom_mb)
        # The first Ctrl-C or SIGTERM ends the run through the `finally` below; a second
        # one (or any during that stop) hurries the stop, never breaks it off.
        with interrupt.signals_interrupt_then_hurry() as stop:
            try:
                public = self._tls(run_dir)
                inner = issue_tls(run_dir / "credentials" / "internal", ["localhost", "127.0.0.1"])
                secret = issue_secret(run_dir / "credentials" / "superexec.secret")
                control = issue_secret(run_dir / "credentials" / "control.secret")
                port = int(self.port) if self.port else free_port(_bind_probe(self.address))
                check_port_free(self.address, port)
                link = free_port("127.0.0.1")
                internal = f"127.0.0.1:{link}"
                cli = FlowerCli(run_dir / "flower", internal, inner.ca_cert, control)
                logs = run_dir / "logs"
                argv = superlink_argv(
                    "127.0.0.1",
                    link,
                    inner.ca_cert,
                    inner.server_cert,
                    inner.server_key,
                    secret,
                    control,
                )
                superlink = procs.start("superlink", argv, cli.env, logs / "superlink.log")
                _wait_listening(superlink, "127.0.0.1", link)
                check_control_locked(internal, inner.ca_cert)
                argv = superexec_argv(internal, inner.ca_cert, secret, os.getpid())
                procs.start("superexec", argv, cli.env, logs / "superexec.log")
                kind = choose(self.proxy)
                gate = Gate(
                    self.address,
                    port,
                    public.server_cert,
                    public.server_key,
                    link,
                    inner.ca_cert,
                    run_dir,
                )
                proxy = procs.start(
                    f"proxy {kind}", proxy_argv(kind, gate), cli.env, logs / "proxy.log"
                )
                _wait_listening(proxy, _local(self.address), port)
                _progress(
                    f"deployment: Fleet API on https://{self.address}:{port} ({kind} proxy, TLS, "
                    f"node auth); SuperLink on 127.0.0.1 only, its Control API only with "
                    "this run's control key"
                )
                nodes = plan_nodes(devices, run_dir, self.memory_limit, headroom.result())
                ids = cli.register([*keys, *(n.key.public_key for n in nodes)])
                _write_registered(run_dir, nodes, ids, list(zip(slots, keys, strict=False)))
                if slots:
                    _progress(
                        f"deployment: waiting for {len(slots)} physical device(s); on each run: "
                        f"python -m fedbench.device superlink=<this host>:{port} "
                        f"root_certificates={public.ca_cert} auth_key=<its .key> "
                        "name=<the name its key was issued for>"
                    )
                started = {}
                for n in nodes:
                    n.home.mkdir(parents=True, exist_ok=True)
                    env = {
                        **cli.env,
                        **ARENA_ENV,
                        "FLWR_HOME": str(n.home),
                        ACCELERATOR_ENV: self.worker_accelerator(),
                    }
                    role = f"supernode {n.device.name}"
                    argv = n.argv(internal, inner.ca_cert, secret)
                    started[n] = procs.start(role, argv, env, n.log).pid
                    argv = n.superexec_argv(secret, started[n])
                    procs.start(f"superexec {n.device.name}", argv, env, n.log)
                    _progress(f"deployment: {n.device.name}: {n.limits.describe()}")
                local_ids = {ids[n.key.public_key] for n in nodes}
                phys = {ids[k] for k in keys}
                self._wait_nodes(cli, procs, run_dir, local_ids, phys, len(slots))
                for slot, key in zip(slots, keys, strict=False):
                    # The seat follows the registered key, whatever the node says it is.
                    _progress(f"physical device {key.stem} is {slot.name} (key {key.name})")
                write_observed_limits(run_dir / "logs" / "limits.csv", started)
                self._submit(cli, procs, experiment, run_dir, verbose)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                stop.begun()
                stopping = time.monotonic()
                pool.shutdown(wait=True, cancel_futures=True)
                # The ServerApp first, so it writes the run's ending; hurried, the stop
                # waits for that only.
                killed = procs.stop(
                    cut_short=lambda: stop.hurry.is_set() and _ended(run_dir),
                    first=lambda role: role.endswith(SERVERAPP),
                )
                _copy_refusals(run_dir)
                for n in nodes:
                    if n.limits.cgroup is not None:
                        remove_cgroup(n.limits.cgroup)
                if killed and stop.hurry.is_set():
                    _progress(f"deployment: killed {len(killed)} process(es), as asked twice")
                elif killed:
                    console.warn(
                        f"deployment: had to kill {len(killed)} process(es): {', '.join(killed)}"
                    )
        if interrupted:
            if mark_interrupted(run_dir):
                console.warn("deployment: the ServerApp was stopped before it wrote its ending")
            _progress(
                f"deployment: interrupted; stopped the {len(procs.seen)} processes it ran "
                f"in {time.monotonic() - stopping:.1f} s"
            )
            raise SystemExit(130)  # the shell's code for "ended by Ctrl-C"

    def _headroom_mb(self) -> int | None:
        if self.address_space_headroom_mb is not None or self.memory_limit == "none":
            return self.address_space_headroom_mb
        return idle_address_space_mb() + FLOWER_HEADROOM_MB

    def _given_tls(self) -> TlsFiles:
        return TlsFiles(*(Path(str(getattr(self, k))).expanduser().resolve() for k in TLS_KEYS))

    def _tls(self, run_dir: Path) -> TlsFiles:
        if self.tls_ca_cert is not None:
            files = self._given_tls()
            files.check()
            return files
        hosts = list(dict.fromkeys([*self.advertise, *LOCAL_NAMES]))
        if self.address not in ("0.0.0.0", "::"):
            hosts.insert(0, self.address)
        return issue_tls(run_dir / "credentials", list(dict.fromkeys(hosts)))

    def _wait_nodes(
        self,
        cli: FlowerCli,
        procs: ProcessSet,
        run_dir: Path,
        local: set[int],
        phys: set[int],
        slots: int,
    ) -> None:
        start = time.monotonic()
        refused = 0
        while True:
            # The SuperLink logs each activation: a cheap signal to poll; the
            # Control API (a `flwr` call, seconds each) confirms it.
            active = _activated(run_dir)
            if local <= active and len(active & phys) >= slots:
                online = {i for i, s in cli.nodes().items() if s == "online"}
                joined = len(online & phys)
                if local <= online and joined >= slots:
                    _progress(
                        f"deployment: {len(local)} local and {joined} physical node(s) online"
                    )
                    return
            waited = time.monotonic() - start
            dead = wait_alive(procs.started, 0.0)
            if dead is not None:
                raise FedbenchError(
                    f"{dead.role} exited with code {dead.popen.returncode} before the run "
                    f"started; see {dead.log}"
                )
            if not local <= active and waited > self.wait_for_nodes_s:
                raise FedbenchError(
                    f"only {len(local & active)} of {len(local)} local SuperNodes came online "
                    f"within runtime.wait_for_nodes_s={self.wait_for_nodes_s:g}s; "
                    f"see {run_dir / 'logs'}"
                )
            joined = len(active & phys)
            if joined < slots and waited > self.wait_for_physical_s:
                raise FedbenchError(
                    f"only {joined} of {slots} physical device(s) joined within "
                    f"runtime.wait_for_physical_s={self.wait_for_physical_s:g}s "
                    f"({len(_refusals(run_dir))} attempt(s) with unregistered keys refused, "
                    f"see {run_dir / 'logs' / 'superlink.log'})"
                )
            now_refused = len(_refusals(run_dir))
            if now_refused > refused:
                _progress(
                    f"deployment: refused {now_refused - refused} node(s) with an unregistered key"
                )
                refused = now_refused
            time.sleep(0.3)

    def _submit(
        self,
        cli: FlowerCli,
        procs: ProcessSet,
        experiment: Experiment,
        run_dir: Path,
        verbose: bool,
    ) -> None:
        app = write_bundle(run_dir / "flower" / "app", experiment.app)
        config = write_run_config(run_dir / "flower" / "run_config.toml", to_json(experiment))
        stream = procs.start(
            "flwr run",
            cli.run_argv(app, config),
            cli.cli_env,
            None,
            stdout=subprocess.PIPE,
            cwd=cli.home,
        )
        run_id: int | None = None
        last_error = ""
        assert stream.popen.stdout is not None
        with (run_dir / "logs" / "server.log").open("w") as log:
            for raw in stream.popen.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                log.write(line + "\n")
                log.flush()
                if (match := RUN_STARTED.search(line)) is not None:
                    run_id = int(match.group(1))
                    _progress(f"deployment: started Flower run {run_id}")
                if line.startswith(PREFIX):
                    # The ServerApp's console, relayed by `flwr run`, which merges its
                    # streams: its warnings back on stderr, what it did on stdout (as the
                    # simulation's console prints them; the driver's own failure line is
                    # stderr's either way).
                    warning = line.startswith(WARNING)
                    print(line, file=sys.stderr if warning else sys.stdout, flush=True)
                elif verbose:
                    print(line, file=sys.stderr, flush=True)
                if "Error" in line and ":" in line:
                    last_error = line.strip()
        code = stream.popen.wait()
        if run_id is None:
            raise FedbenchError(
                f"`flwr run` exited with code {code} without starting a run; "
                f"see {run_dir / 'logs' / 'server.log'}"
            )
        status, details = cli.run_status(run_id)
        if status != "finished:completed":
            why = last_error or details
            raise FedbenchError(
                f"Flower run {run_id} ended {status}: {why}; see {run_dir / 'logs' / 'server.log'}"
            )


def _progress(line: str) -> None:
    console.line(line)


def _ended(run_dir: Path) -> bool:
    """The ServerApp has written the run's ending: summary.json is there and not `running`."""
    path = run_dir / SUMMARY_JSON
    try:
        summary = bounded.load_json(path, str(path), bounded.SUMMARY_JSON)
    except (OSError, ValueError, FedbenchError):
        return False
    return isinstance(summary, dict) and summary.get("status") != "running"


def _local(address: str) -> str:
    """The address local processes dial to reach a server bound to `address`."""
    return "127.0.0.1" if address in ("0.0.0.0", "::", "") else address


def _bind_probe(address: str) -> str:
    return "0.0.0.0" if address in ("0.0.0.0", "::", "") else address


def _wait_listening(proc: Started, host: str, port: int, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.popen.poll() is not None:
            raise FedbenchError(
                f"{proc.role} exited with code {proc.popen.returncode}; see {proc.log}"
            )
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1.0):
            return
        time.sleep(0.2)
    raise FedbenchError(f"{proc.role} did not listen on {host}:{port} within {timeout_s:g}s")


def _activated(run_dir: Path) -> set[int]:
    """Node ids the SuperLink has activated and not deactivated since (its log)."""
    active: set[int] = set()
    for line in _superlink_log(run_dir):
        if (m := ACTIVATED.search(line)) is not None:
            active.add(int(m.group(1)))
        elif (m := DEACTIVATED.search(line)) is not None:
            active.discard(int(m.group(1)))
    return active


def _superlink_log(run_dir: Path) -> list[str]:
    try:
        return (run_dir / "logs" / "superlink.log").read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def _refusals(run_dir: Path) -> list[str]:
    return [line for line in _superlink_log(run_dir) if REFUSED.search(line)]


def _copy_refusals(run_dir: Path) -> None:
    nodes = _refusals(run_dir)
    local = [
        line for line in _superlink_log(run_dir) if CONTROL_REFUSED in line or OTHER_ACCOUNT in line
    ]
    try:
        requests = (run_dir / REFUSED_REQUESTS).read_text().splitlines()
    except OSError:
        requests = []
    if nodes or requests or local:
        text = ""
        if nodes:
            text += "# Nodes the SuperLink refused: their public key is not registered.\n"
            text += "\n".join(nodes) + "\n"
        if requests:
            text += "# Requests the proxy refused: not the Fleet API (time, peer, method, path).\n"
            text += "\n".join(requests) + "\n"
        if local:
            text += (
                "# Calls the SuperLink refused on 127.0.0.1: no Control API credential, "
                "or another account's.\n"
            )
            text += "\n".join(local) + "\n"
        (run_dir / "refused.log").write_text(text)


def check_control_locked(address: str, ca: Path, timeout_s: float = 30.0) -> None:
    """Refuse to go on unless the SuperLink refuses a Control API call without the key.

    The gate is fedbench's wrapper around Flower's app (fedbench.runtime.superlink);
    should a Flower release start its server another way, the wrapper would not be
    in place and every local account could start runs: this is where that shows.
    """
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context(cafile=str(ca))
    status = 0
    with contextlib.suppress(OSError, http.client.HTTPException):
        conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=timeout_s)
        conn.request("POST", "/v1/control/list-runs", body=b"", headers=_PROTOBUF)
        status = conn.getresponse().status
        conn.close()
    if status != 403:
        raise FedbenchError(
            f"the SuperLink on {address} answered a Control API call without this run's "
            f"control key (HTTP {status or 'no answer'}): fedbench will not run a deployment "
            "any local account could submit code to (is this Flower release supported?)"
        )


def _rotate(log: Path) -> None:
    """Keep an earlier attempt's log aside: the run reads its own from the start."""
    if log.exists():
        n = len(list(log.parent.glob(f"{log.stem}.*{log.suffix}"))) + 1
        log.replace(log.with_name(f"{log.stem}.{n}{log.suffix}"))


def check_address(address: str) -> None:
    """Refuse an address this host cannot listen on, before any process starts.

    Binding a socket sends nothing: an address that is not one of this host's
    interfaces fails here at once (EADDRNOTAVAIL) instead of deep in the run.
    A host name is refused rather than looked up: the SuperLink listens on an
    address, and the names devices dial belong in runtime.advertise.
    """
    try:
        ip = ipaddress.ip_address(_bind_probe(address))
    except ValueError:
        raise FedbenchError(
            f"runtime.address={address!r}: not an IP address; give the address the deployment "
            "listens on (127.0.0.1: this host only, 0.0.0.0: every interface, or one of this "
            "host's addresses) and put the names devices dial in runtime.advertise"
        ) from None
    with socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET) as s:
        try:
            s.bind((str(ip), 0))
        except OSError as exc:
            raise FedbenchError(
                f"runtime.address={address}: this host cannot listen there ({exc.strerror}); "
                "give 127.0.0.1 (this host only), 0.0.0.0 (every interface) or one of this "
                "host's addresses"
            ) from None


def check_port_free(address: str, port: int) -> None:
    """Refuse at once a port another process holds (Flower would retry for minutes)."""
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as s:
        try:
            s.bind((_bind_probe(address), port))
        except OSError as exc:
            raise FedbenchError(
                f"runtime.port={port}: cannot listen on {address}:{port} ({exc.strerror}); "
                "another program holds it - choose another port, or null for a free one"
            ) from None


REGISTERED = Path("credentials") / "registered.csv"


def _write_registered(
    run_dir: Path,
    nodes: Sequence[LocalNode],
    ids: dict[Path, int],
    physical_seats: Sequence[tuple[DeviceSpec, Path]],
) -> None:
    """Which node id each device's key was registered as: the seat of every device.

    Physical slots take the listed keys in order (runtime.physical_keys);
    whatever a node later says about itself does not move it to another seat.
    """
    rows = ["node_id,kind,device,public_key"]
    for n in nodes:
        rows.append(f"{ids[n.key.public_key]},local,{n.device.name},{n.key.public_key}")
    rows += [f"{ids[k]},physical,{slot.name},{k}" for slot, k in physical_seats]
    (run_dir / REGISTERED).write_text("\n".join(rows) + "\n")


def registered_nodes(run_dir: Path) -> dict[str, int]:
    """Device name -> node id, as the deployment registered them."""
    return {device: node for device, (node, _, _) in _registered(run_dir).items()}


def _registered(run_dir: Path) -> dict[str, tuple[int, str, str]]:
    """Device -> (node id, "physical" or "", the key's name) from credentials/registered.csv."""
    path = run_dir / REGISTERED
    try:
        lines = path.read_text().splitlines()[1:]
    except FileNotFoundError:
        raise FedbenchError(f"{path}: missing (the deployment runtime writes it)") from None
    out: dict[str, tuple[int, str, str]] = {}
    for line in lines:
        node, kind, device, key = line.split(",", 3)
        if device:
            out[device] = (int(node), "physical" if kind == "physical" else "", Path(key).stem)
    return out
