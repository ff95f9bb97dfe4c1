"""A CA and a serving certificate for the admission webhook, made with `cryptography`.

For local use and tests (`tandem certs --out DIR`, or an operator started with a
certificate directory that holds none): in a cluster, cert-manager's CA injection or
certificates an administrator made take their place (docs/operator.md). Keys are ECDSA
P-256; the serving certificate names every `--dns` name (the webhook Service's
`<service>.<namespace>.svc` forms) and 127.0.0.1, and is valid from `now` for `days`.
The time is passed in; the keys come from the operating system's randomness.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE, CERT_FILE, KEY_FILE = "ca.crt", "tls.crt", "tls.key"


@dataclass(frozen=True)
class Certificates:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path) -> list[Path]:
        """Write ca.crt, tls.crt and tls.key (the key readable by the owner only), each
        beside its final name first and then renamed, so a reader never sees half a file."""
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for name, data, mode in ((CA_FILE, self.ca_pem, 0o644), (CERT_FILE, self.cert_pem, 0o644), (KEY_FILE, self.key_pem, 0o600)):
            target = directory / name
            partial = directory / f".{name}.partial"
            partial.write_bytes(data)
            os.chmod(partial, mode)
            partial.replace(target)
            written.append(target)
        return written


def make_certificates(dns_names: list[str], now: datetime, days: int = 365) -> Certificates:
    """A self-signed CA and a certificate it signed for `dns_names` (and 127.0.0.1)."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tandem webhook CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = list(dict.fromkeys(dns_names)) or ["localhost"]
    alternative: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    alternative.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(alternative), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Certificates(
        ca.public_bytes(serialization.Encoding.PEM),
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )


def service_names(service: str, namespace: str) -> list[str]:
    """The names a Service answers to inside a cluster, for the certificate's SANs."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]
