"""The go-plugin side: cookie, version negotiation, certificates, the
handshake line, logs, the controller and the mutual-TLS frontend."""

import base64
import datetime
import io
import json
import os
import socket
import ssl
import tempfile
import threading
import time
import unittest
from concurrent import futures

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from groupfilter import goplugin

COOKIE = {"KMIRROR_PLUGIN": "8b0f3c2e-kmirror-plugin-v1"}


def p521_cert():
    """A certificate like go-plugin's host makes: self-signed CA, P-521,
    "localhost". Returns key PEM, cert PEM."""
    key = ec.generate_private_key(ec.SECP521R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA512())
    )
    return (
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        cert.public_bytes(serialization.Encoding.PEM),
    )


class HandshakeTest(unittest.TestCase):
    def test_cookie(self):
        goplugin.check_cookie(COOKIE)
        for env in ({}, {"KMIRROR_PLUGIN": "other"}):
            with self.assertRaises(goplugin.HandshakeError) as cm:
                goplugin.check_cookie(env)
            self.assertIn("meant to be launched by kmirror", str(cm.exception))

    def test_negotiate_version(self):
        self.assertEqual(goplugin.negotiate_version({"PLUGIN_PROTOCOL_VERSIONS": "1"}, (1,)), (1, True))
        self.assertEqual(goplugin.negotiate_version({"PLUGIN_PROTOCOL_VERSIONS": "3,1,2"}, (1, 2)), (2, True))
        # No common version: answer ours, the host refuses with both named.
        self.assertEqual(goplugin.negotiate_version({"PLUGIN_PROTOCOL_VERSIONS": "2"}, (1,)), (1, False))
        # An older host that does not negotiate.
        self.assertEqual(goplugin.negotiate_version({}, (1,)), (1, True))

    def test_client_certificate(self):
        _, pem = p521_cert()
        self.assertEqual(goplugin.client_certificate({"PLUGIN_CLIENT_CERT": pem.decode()}), pem.decode())
        with self.assertRaisesRegex(goplugin.HandshakeError, "PLUGIN_CLIENT_CERT is not set"):
            goplugin.client_certificate({})
        with self.assertRaisesRegex(goplugin.HandshakeError, "not a PEM certificate"):
            goplugin.client_certificate({"PLUGIN_CLIENT_CERT": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"})

    def test_server_certificate_is_what_go_plugin_verifies(self):
        _, cert_pem, der = goplugin.self_signed_cert()
        cert = x509.load_der_x509_certificate(der)
        self.assertEqual(cert.public_bytes(serialization.Encoding.PEM), cert_pem)
        self.assertEqual(cert.issuer, cert.subject)
        self.assertEqual(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName), ["localhost"])
        self.assertTrue(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
        self.assertTrue(cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign)
        self.assertIn(ExtendedKeyUsageOID.SERVER_AUTH, cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
        cert.verify_directly_issued_by(cert)

    def test_handshake_line(self):
        _, _, der = goplugin.self_signed_cert()
        field = goplugin.encode_cert(der)
        self.assertNotIn("=", field)
        self.assertEqual(base64.b64decode(field + "=" * (-len(field) % 4)), der)
        line = goplugin.handshake_line(1, "127.0.0.1:10001", field)
        self.assertEqual(line.split("|"), ["1", "1", "tcp", "127.0.0.1:10001", "grpc", field])
        self.assertNotIn("\n", line)


class JSONLogTest(unittest.TestCase):
    def test_lines_are_hclog_json(self):
        out = io.StringIO()
        goplugin.JSONLog(stream=out).info("serving", address="127.0.0.1:1", n=3)
        line = json.loads(out.getvalue())
        self.assertEqual((line["@level"], line["@message"], line["@module"], line["address"], line["n"]),
                         ("info", "serving", "python-groups", "127.0.0.1:1", 3))
        # go-plugin parses exactly 2006-01-02T15:04:05.000000Z07:00.
        self.assertRegex(line["@timestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        self.assertEqual(out.getvalue().count("\n"), 1)


class ControllerTest(unittest.TestCase):
    def test_shutdown_calls_back(self):
        called = threading.Event()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((goplugin.controller_handler(called.set),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.addCleanup(server.stop, None)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            shutdown = ch.unary_unary("/plugin.GRPCController/Shutdown", request_serializer=bytes, response_deserializer=bytes)
            self.assertEqual(shutdown(b"", timeout=10), b"")
        self.assertTrue(called.is_set())


class MTLSFrontendTest(unittest.TestCase):
    """The frontend against Python's own TLS client holding a P-521
    certificate, as go-plugin's host does; the upstream is an echo server."""

    def setUp(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        self.dir = d.name
        upstream = os.path.join(d.name, "echo.sock")
        self.echo = socket.socket(socket.AF_UNIX)
        self.echo.bind(upstream)
        self.echo.listen()
        self.addCleanup(self.echo.close)
        threading.Thread(target=self._echo, daemon=True).start()

        self.host_key, self.host_cert = p521_cert()
        key_pem, cert_pem, self.server_der = goplugin.self_signed_cert()
        ctx = goplugin.tls_context(self.host_cert.decode(), key_pem, cert_pem)
        self.logs = io.StringIO()
        self.frontend = goplugin.MTLSFrontend(ctx, upstream, goplugin.JSONLog(stream=self.logs))
        self.address = self.frontend.listen({"PLUGIN_MIN_PORT": "0", "PLUGIN_MAX_PORT": "0"})
        self.addCleanup(self.frontend.close)

    def _echo(self):
        while True:
            try:
                conn, _ = self.echo.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

    def client_context(self, key_pem, cert_pem):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cadata=ssl.DER_cert_to_PEM_cert(self.server_der))
        ctx.set_alpn_protocols(["h2"])
        if key_pem:
            for name, data in (("k.pem", key_pem), ("c.pem", cert_pem)):
                with open(os.path.join(self.dir, name), "wb") as f:
                    f.write(data)
            ctx.load_cert_chain(os.path.join(self.dir, "c.pem"), os.path.join(self.dir, "k.pem"))
        return ctx

    def connect(self, ctx):
        host, port = self.address.rsplit(":", 1)
        raw = socket.create_connection((host, int(port)), timeout=10)
        return ctx.wrap_socket(raw, server_hostname="localhost")

    def test_listens_on_loopback(self):
        self.assertTrue(self.address.startswith("127.0.0.1:"))

    def test_the_hosts_certificate_gets_through_and_bytes_flow_both_ways(self):
        with self.connect(self.client_context(self.host_key, self.host_cert)) as s:
            self.assertEqual(s.selected_alpn_protocol(), "h2")
            s.sendall(b"ping")
            got = b""
            while len(got) < 4:
                got += s.recv(4)
            self.assertEqual(got, b"ping")

    def assertRefused(self, ctx):
        # TLS 1.3: the server's refusal of the client's certificate may
        # arrive only with the first read.
        with self.assertRaises((ssl.SSLError, ConnectionError)):
            with self.connect(ctx) as s:
                s.sendall(b"ping")
                if not s.recv(4):
                    raise ConnectionError("closed")

    def assertRefusalLogged(self):
        deadline = time.monotonic() + 10
        while "refused a connection: TLS handshake failed" not in self.logs.getvalue():
            self.assertLess(time.monotonic(), deadline, "the refusal was not logged")
            time.sleep(0.01)

    def test_no_client_certificate_is_refused(self):
        self.assertRefused(self.client_context(None, None))
        self.assertRefusalLogged()

    def test_another_certificate_is_refused(self):
        self.assertRefused(self.client_context(*p521_cert()))
        self.assertRefusalLogged()

    def test_port_range(self):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            free = probe.getsockname()[1]
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        key_pem, cert_pem, _ = goplugin.self_signed_cert()
        f = goplugin.MTLSFrontend(goplugin.tls_context(self.host_cert.decode(), key_pem, cert_pem), os.path.join(d.name, "x"), goplugin.JSONLog(stream=io.StringIO()))
        self.addCleanup(f.close)
        self.assertEqual(f.listen({"PLUGIN_MIN_PORT": str(free), "PLUGIN_MAX_PORT": str(free)}), f"127.0.0.1:{free}")
        # That one port is taken now: a second frontend cannot listen.
        g = goplugin.MTLSFrontend(goplugin.tls_context(self.host_cert.decode(), key_pem, cert_pem), os.path.join(d.name, "x"), goplugin.JSONLog(stream=io.StringIO()))
        self.addCleanup(g.close)
        with self.assertRaisesRegex(goplugin.HandshakeError, f"ports {free}..{free}"):
            g.listen({"PLUGIN_MIN_PORT": str(free), "PLUGIN_MAX_PORT": str(free)})


if __name__ == "__main__":
    unittest.main()
