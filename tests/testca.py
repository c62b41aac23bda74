"""A certificate authority of the tests' own, for the HTTPS servers of the test internet
(a provider, hosts a secret is bound to): paddockd is told to trust it, boxes are not."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_DAY = datetime.timedelta(days=1)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class TestCA:
    __test__ = False

    def __init__(self, directory: Path, cn: str = "Paddock tests CA") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory
        self.cn = cn
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(_name(cn))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + 30 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.pem = directory / "ca.pem"
        self.pem.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, *names: str) -> tuple[Path, Path]:
        """(certificate, key) files for these host names or IPv4 addresses."""
        key = ec.generate_private_key(ec.SECP256R1())
        alt: list[x509.GeneralName] = []
        for n in (name, *names):
            try:
                alt.append(x509.IPAddress(ipaddress.IPv4Address(n)))
            except ValueError:
                alt.append(x509.DNSName(n))
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + 30 * _DAY)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        cert_file, key_file = self.dir / f"{name}.pem", self.dir / f"{name}.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(_pem_key(key))
        return cert_file, key_file
