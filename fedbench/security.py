"""Credentials of a deployment: the SuperLink's TLS certificates and the devices' node keys.

Flower 1.41 encrypts every SuperLink API (Fleet, Control, Runtime) with one
server certificate, and with `--enable-supernode-auth` admits only
SuperNodes whose public key was registered (`flwr supernode register`).
A node key is an elliptic-curve key pair on a NIST curve (P-384 here) in
OpenSSH format: the private half stays on the device
(`flower-supernode --auth-supernode-private-key`), the public half is what
the operator registers.

For a local test fleet everything is issued into the run folder: a private
CA (`ca.pem`), a server certificate signed by it for the SuperLink's
addresses, and one key pair per device. A real deployment brings its own
CA-signed certificate and registers the public keys its devices print
(`python -m fedbench.device issue-credentials`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fedbench.cli.grammar import Grammar, Key
from fedbench.errors import FedbenchError

# Flower accepts any NIST curve for node keys; P-384 is what its docs use.
NODE_CURVE = ec.SECP384R1()
NIST_CURVES = ("secp256r1", "secp384r1", "secp521r1")
CERT_DAYS = 30  # a test fleet's certificates outlive any run, not the machine
ISSUE_TLS = Grammar(
    prog="python -m fedbench.security issue-tls",
    summary="Issue a private CA and a SuperLink server certificate for the hosts "
    "(give them to runtime.tls_*; devices get ca.pem).",
    keys=(
        Key("out", "folder for ca.pem, server.pem and server.key", required=True),
        Key("hosts", "IP addresses or DNS names of the server, comma-separated", required=True),
    ),
    examples=("python -m fedbench.security issue-tls out=certs hosts=192.168.1.10,server.lan",),
    aliases={"host": "hosts"},
)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files the SuperLink serves with and the devices verify it by."""

    ca_cert: Path  # devices: --root-certificates; SuperLink: --ssl-ca-certfile
    server_cert: Path
    server_key: Path

    def check(self) -> None:
        """Refuse what the proxy could not serve with: one line naming the key and the file."""
        ca = _pem_certificates("tls_ca_cert", self.ca_cert)[0]
        cert = _pem_certificates("tls_server_cert", self.server_cert)[0]
        key = _pem_private_key("tls_server_key", self.server_key)
        spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
            raise FedbenchError(
                f"runtime.tls_server_key={self.server_key}: not the key of "
                f"runtime.tls_server_cert={self.server_cert} (their public keys differ)"
            )
        now = dt.datetime.now(dt.UTC)
        for label, path, c in (
            ("tls_ca_cert", self.ca_cert, ca),
            ("tls_server_cert", self.server_cert, cert),
        ):
            if c.not_valid_after_utc < now:
                raise FedbenchError(
                    f"runtime.{label}={path}: the certificate expired on "
                    f"{c.not_valid_after_utc:%Y-%m-%d %H:%M} UTC; issue a new one "
                    "(python -m fedbench.security issue-tls)"
                )
        try:  # what the proxy does with them
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.server_cert, self.server_key)
        except ssl.SSLError as exc:
            raise FedbenchError(
                f"runtime.tls_server_cert={self.server_cert}: TLS cannot serve it with "
                f"runtime.tls_server_key={self.server_key} ({exc.reason or exc})"
            ) from None


def _pem_bytes(label: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise FedbenchError(f"runtime.{label}={path}: no such file") from None
    except IsADirectoryError:
        raise FedbenchError(f"runtime.{label}={path}: a folder, not a PEM file") from None
    except OSError as exc:
        raise FedbenchError(f"runtime.{label}={path}: cannot be read ({exc.strerror})") from None


def _pem_certificates(label: str, path: Path) -> list[x509.Certificate]:
    data = _pem_bytes(label, path)
    if b"PRIVATE KEY-----" in data:
        raise FedbenchError(
            f"runtime.{label}={path}: holds a private key, not a certificate "
            "(swapped with runtime.tls_server_key?)"
        )
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise FedbenchError(
            f"runtime.{label}={path}: not a PEM certificate (no valid "
            f"'-----BEGIN CERTIFICATE-----' block: {exc})"
        ) from None


def _pem_private_key(label: str, path: Path) -> PrivateKeyTypes:
    data = _pem_bytes(label, path)
    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError:  # cryptography's way of saying "encrypted"
        raise FedbenchError(
            f"runtime.{label}={path}: the key is encrypted; the proxy needs it without "
            "a passphrase (openssl pkey -in KEY -out KEY.plain)"
        ) from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise FedbenchError(
            f"runtime.{label}={path}: not a PEM private key (no valid "
            f"'-----BEGIN ... PRIVATE KEY-----' block: {exc})"
        ) from None


@dataclass(frozen=True)
class NodeKey:
    """One device's key pair (OpenSSH format)."""

    name: str
    private_key: Path
    public_key: Path


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 from the start so the key is never readable by others.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fedbench"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


_DNS_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(check_host_name(host)))
    return x509.SubjectAlternativeName(names)


def check_host_name(host: str) -> str:
    """A DNS name a certificate can carry (RFC 1123); anything else would match no client."""
    labels = host.rstrip(".").split(".")
    if len(host) > 253 or not all(_DNS_LABEL.fullmatch(label) for label in labels):
        raise FedbenchError(
            f"hosts: {host!r} is neither an IP address nor a DNS name (letters, digits and '-' "
            "between dots); give the addresses or names devices dial, e.g. hosts=192.168.1.10,"
            "server.lan"
        )
    return host


def issue_tls(out_dir: Path, hosts: Sequence[str]) -> TlsFiles:
    """A fresh CA and a server certificate it signed, valid for `hosts` (IPs or names)."""
    if not hosts:
        raise FedbenchError("a server certificate needs at least one host name or address")
    san = _san(hosts)  # a bad host is refused before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(minutes=5), now + dt.timedelta(days=CERT_DAYS)

    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = _name("fedbench test CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA384())
    )
    server_key = ec.generate_private_key(ec.SECP384R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA384())
    )
    files = TlsFiles(out_dir / "ca.pem", out_dir / "server.pem", out_dir / "server.key")
    files.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.server_cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    _write_private(
        files.server_key,
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    return files


def issue_secret(path: Path) -> Path:
    """A fresh random shared secret (the SuperExec's), readable by this user only."""
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    _write_private(path, secrets.token_hex(32).encode())
    return path


def issue_node_key(out_dir: Path, name: str) -> NodeKey:
    """A new key pair for device `name`: `<name>.key` (private) and `<name>.pub`."""
    if not name or any(c in name for c in "/\\ \t\n") or name.startswith("."):
        raise FedbenchError(f"device name {name!r}: use letters, digits, '-', '_' or '.'")
    out_dir.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(NODE_CURVE)
    files = NodeKey(name, out_dir / f"{name}.key", out_dir / f"{name}.pub")
    _write_private(
        files.private_key,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        ),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    files.public_key.write_bytes(public + f" fedbench-{name}\n".encode())
    return files


def read_public_key(path: Path) -> str:
    """The OpenSSH text of a node's public key, refused unless it is EC on a NIST curve."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise FedbenchError(f"node public key {path}: no such file") from None
    try:
        key = serialization.load_ssh_public_key(text)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise FedbenchError(f"node public key {path}: not an OpenSSH public key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in NIST_CURVES:
        raise FedbenchError(
            f"node public key {path}: expected an EC key on a NIST curve "
            f"({', '.join(NIST_CURVES)}); issue one with "
            "`python -m fedbench.device issue-credentials`"
        )
    return text.decode().strip()


def check_certificates(key: str, path: Path) -> None:
    """Refuse a CA file that holds no PEM certificate (Flower would retry the handshake forever)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FedbenchError(f"{key}={path}: no such file") from None
    except OSError as exc:
        raise FedbenchError(f"{key}={path}: cannot read it ({exc.strerror})") from None
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise FedbenchError(
            f"{key}={path}: not a PEM certificate (-----BEGIN CERTIFICATE-----); give the CA "
            "that signed the SuperLink's certificate (<run>/credentials/ca.pem)"
        ) from None


def check_private_key(path: Path) -> None:
    """Refuse a node private key Flower would reject, with a message naming the file."""
    try:
        key = serialization.load_ssh_private_key(path.read_bytes(), password=None)
    except FileNotFoundError:
        raise FedbenchError(f"auth_key={path}: no such file") from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise FedbenchError(f"auth_key={path}: not an OpenSSH private key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise FedbenchError(f"auth_key={path}: expected an EC private key")


def _issue(argv: Sequence[str]) -> str:
    args = ISSUE_TLS.parse(argv)
    hosts = [h.strip() for h in args["hosts"].split(",") if h.strip()]
    files = issue_tls(Path(args["out"]).expanduser(), hosts)
    return "\n".join(
        [
            f"runtime.tls_ca_cert={files.ca_cert.resolve()}",
            f"runtime.tls_server_cert={files.server_cert.resolve()}",
            f"runtime.tls_server_key={files.server_key.resolve()}",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m fedbench.security issue-tls out=DIR hosts=HOST,...`: a reusable test CA."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "issue-tls":
        if args and args[0] in ("-h", "--help"):
            print(ISSUE_TLS.help(), end="")
            return 0
        print(
            f"{ISSUE_TLS.name}: error: expected the command issue-tls, e.g. "
            f"{ISSUE_TLS.examples[0]}",
            file=sys.stderr,
        )
        return 2
    return ISSUE_TLS.main(_issue, args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
