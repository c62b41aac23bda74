"""The credential gateway's certificate authority: one per server, made at first start,
its private key readable by paddockd alone. Boxes trust its certificate, so the gateway
can answer TLS for the hosts a user's secret is bound to (and only those: every other
host's TLS passes through untouched). Leaf certificates are minted per host name on first
use and kept in memory."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = datetime.timedelta(days=1)
CA_YEARS = 10
LEAF_DAYS = 30
_CACHED = 256  # leaf contexts kept; a box naming thousands of hosts only re-mints


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


class Authority:
    """The CA's key and certificate (`ca.pem`, public; `ca.key`, 0600) under `directory`."""

    def __init__(self, directory: Path, name: str = "Paddock credential gateway") -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        key_path, cert_path = directory / "ca.key", directory / "ca.pem"
        if not key_path.exists():
            key = ec.generate_private_key(ec.SECP256R1())
            _write_private(
                key_path,
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                ),
            )
            cert_path.unlink(missing_ok=True)
        loaded = serialization.load_pem_private_key(key_path.read_bytes(), None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path} is not an EC key")
        self._key = loaded
        if not cert_path.exists():
            cert_path.write_bytes(self._self_signed(name).public_bytes(serialization.Encoding.PEM))
        self.pem = cert_path.read_bytes()
        self.cert = x509.load_pem_x509_certificate(self.pem)
        self._leaf_key = ec.generate_private_key(ec.SECP256R1())
        self._leaf_key_pem = self._leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        self._contexts: OrderedDict[str, ssl.SSLContext] = OrderedDict()
        self._lock = threading.Lock()

    def _self_signed(self, name: str) -> x509.Certificate:
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.COMMON_NAME, name),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Paddock"),
            ]
        )
        public = self._key.public_key()
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - _DAY)
            .not_valid_after(_now() + CA_YEARS * 365 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
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
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self._key, hashes.SHA256())
        )

    def leaf(self, host: str) -> x509.Certificate:
        """A certificate for `host` (a name or an IPv4 address), signed by the CA."""
        try:
            alt: x509.GeneralName = x509.IPAddress(ipaddress.IPv4Address(host))
        except ValueError:
            alt = x509.DNSName(host)
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64])]))
            .issuer_name(self.cert.subject)
            .public_key(self._leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - _DAY)
            .not_valid_after(_now() + LEAF_DAYS * _DAY)
            .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )

    def server_context(self, host: str) -> ssl.SSLContext:
        """A TLS server context presenting `host`'s leaf (HTTP/1.1 only; `host` may be a
        `*.` wildcard), cached. Safe to call from several threads."""
        with self._lock:
            ctx = self._contexts.get(host)
            if ctx is not None:
                self._contexts.move_to_end(host)
                return ctx
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])
        chain = self.leaf(host).public_bytes(serialization.Encoding.PEM) + self.pem
        # load_cert_chain reads files only: a private temporary directory holds them for
        # the call (the key is the gateway's leaf key, never the CA's).
        with tempfile.TemporaryDirectory(prefix="paddock-leaf-") as tmp:
            cert_file, key_file = Path(tmp) / "leaf.pem", Path(tmp) / "leaf.key"
            cert_file.write_bytes(chain)
            _write_private(key_file, self._leaf_key_pem)
            ctx.load_cert_chain(cert_file, key_file)
        with self._lock:
            self._contexts[host] = ctx
            if len(self._contexts) > _CACHED:
                self._contexts.popitem(last=False)
        return ctx
