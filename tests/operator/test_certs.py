"""Certificates for the webhook: a CA, and a serving certificate it signed for the names asked."""

from __future__ import annotations

import ssl
import stat
from datetime import datetime, timezone

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from tandem.runtime.certs import make_certificates, service_names


def test_the_serving_certificate_is_signed_by_the_ca_and_names_the_service(tmp_path):
    now = datetime(2026, 11, 25, tzinfo=timezone.utc)
    certs = make_certificates(service_names("tandem-webhook", "tandem-system"), now, days=30)
    ca = x509.load_pem_x509_certificate(certs.ca_pem)
    cert = x509.load_pem_x509_certificate(certs.cert_pem)
    assert cert.issuer == ca.subject
    ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert "tandem-webhook.tandem-system.svc" in names and "tandem-webhook" in names
    assert cert.not_valid_after_utc == datetime(2026, 12, 25, tzinfo=timezone.utc)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    files = certs.write(tmp_path / "certs")
    assert [f.name for f in files] == ["ca.crt", "tls.crt", "tls.key"]
    assert stat.S_IMODE((tmp_path / "certs" / "tls.key").stat().st_mode) == 0o600
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "certs" / "tls.crt", tmp_path / "certs" / "tls.key")  # a server can use them
    assert not list((tmp_path / "certs").glob(".*.partial"))


def test_the_certs_command_writes_the_files_and_refuses_a_bad_directory(tmp_path):
    from typer.testing import CliRunner

    from tandem.cli.main import app

    result = CliRunner().invoke(app, ["certs", "--out", str(tmp_path / "c"), "--dns", "tandem-webhook.tandem-system.svc"])
    assert result.exit_code == 0, result.output
    cert = x509.load_pem_x509_certificate((tmp_path / "c" / "tls.crt").read_bytes())
    assert cert.subject.rfc4514_string() == "CN=tandem-webhook.tandem-system.svc"
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(app, ["certs", "--out", str(tmp_path / "file" / "c")])
    assert result.exit_code == 2 and "--out: cannot write" in result.output and "Traceback" not in result.output


def _served_certificate(port: int) -> bytes:
    """The DER certificate the server at 127.0.0.1:`port` presents."""
    import socket

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, context.wrap_socket(raw) as tls:
        served = tls.getpeercert(binary_form=True)
    assert served is not None
    return served


def test_a_renewed_certificate_is_served_without_a_restart_and_a_broken_one_is_not(tmp_path, caplog):
    """cert-manager renews the Secret; the webhook serves the new pair from the next
    connection on. A pair caught half-written keeps the last good one in use."""
    from support.controller_world import world
    from tandem.operator.webhook import serve_webhook

    first = make_certificates(["localhost"], datetime(2026, 1, 1, tzinfo=timezone.utc))
    first.write(tmp_path)
    server = serve_webhook(world().snapshot, tmp_path, 0, host="127.0.0.1")
    port = server.server_address[1]
    try:
        def serial() -> int:
            return x509.load_der_x509_certificate(_served_certificate(port)).serial_number

        before = serial()
        assert before == x509.load_pem_x509_certificate(first.cert_pem).serial_number
        renewed = make_certificates(["localhost"], datetime(2026, 3, 1, tzinfo=timezone.utc))
        renewed.write(tmp_path)
        after = serial()
        assert after == x509.load_pem_x509_certificate(renewed.cert_pem).serial_number != before
        (tmp_path / "tls.key").write_text("not a key\n")
        with caplog.at_level("WARNING", logger="tandem.webhook"):
            assert serial() == after and serial() == after, "the last good pair still serves"
        assert sum("does not load" in r.message for r in caplog.records) == 1, "said once per broken pair"
    finally:
        server.shutdown()
        server.server_close()
