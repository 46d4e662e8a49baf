"""What HashiCorp go-plugin asks of a plugin process, in Python.

kmirror's host launches plugins through go-plugin (v1.8). A plugin must:
  1. check the magic cookie in its environment (KMIRROR_PLUGIN);
  2. pick its application protocol version among PLUGIN_PROTOCOL_VERSIONS;
  3. serve gRPC on 127.0.0.1 with mutual TLS ("AutoMTLS"): the host's
     certificate arrives PEM-encoded in PLUGIN_CLIENT_CERT; the plugin makes a
     self-signed certificate for "localhost", requires and verifies the host's
     certificate, and sends its own in the handshake line (MTLSFrontend: the
     TLS is Python's, in front of a gRPC server on a private Unix socket);
  4. print one handshake line on stdout:
       CORE-PROTOCOL-VERSION|APP-PROTOCOL-VERSION|tcp|127.0.0.1:PORT|grpc|SERVER-CERT
     SERVER-CERT is the DER certificate in base64 without padding;
  5. register grpc.health.v1.Health with service "plugin" SERVING, and
     plugin.GRPCController's Shutdown so that the host stops it gracefully;
  6. log JSON lines on stderr (hclog's format), which the host re-logs under
     plugin.<kind>.<name>.
docs/plugins.md ("Plugins in other languages") says the same for any language.
"""

import asyncio
import base64
import datetime
import json
import os
import secrets
import ssl
import sys
import tempfile
import threading

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

MAGIC_COOKIE_KEY = "KMIRROR_PLUGIN"
MAGIC_COOKIE_VALUE = "8b0f3c2e-kmirror-plugin-v1"

# go-plugin's own protocol version: the first field of the handshake line.
CORE_PROTOCOL_VERSION = 1


class HandshakeError(Exception):
    """The process was not started by a kmirror host, or not as one expects."""


def check_cookie(environ):
    """Raise HandshakeError unless environ carries kmirror's magic cookie."""
    if environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        raise HandshakeError(
            "This program is a kmirror plugin: it is meant to be launched by kmirror "
            "(configure it under plugins: in the kmirror configuration), not run by hand."
        )


def negotiate_version(environ, supported):
    """The application protocol version to answer in the handshake line.

    The host lists the versions it speaks in PLUGIN_PROTOCOL_VERSIONS
    ("1,2"). Answer the highest version both speak; when there is none,
    answer our own highest anyway, as go-plugin's Go servers do, so that the
    host refuses the plugin with a message naming both versions. Returns the
    version and whether the host offered it (True when it offered nothing:
    an older host that does not negotiate).
    """
    if not environ.get("PLUGIN_PROTOCOL_VERSIONS", "").strip():
        return max(supported), True
    offered = set()
    for item in environ.get("PLUGIN_PROTOCOL_VERSIONS", "").split(","):
        item = item.strip()
        if item.isdigit():
            offered.add(int(item))
    common = offered & set(supported)
    if common:
        return max(common), True
    return max(supported), False


def self_signed_cert(now=None):
    """A new key and a self-signed certificate for "localhost", as PEM, plus
    the certificate's DER bytes.

    The host verifies the plugin's certificate with that very certificate as
    its only root, for the name "localhost": so it must be a CA certificate
    (basic constraints CA, key usage cert sign) with "localhost" as a DNS
    subject alternative name, good for server and client authentication.
    P-256 keys: quick to make at every launch, and what Go verifies fastest.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, "localhost"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kmirror plugin"),
    ])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(seconds=30))
        # The certificate lives as long as the process; a year is plenty.
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=True, key_cert_sign=True, crl_sign=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM), cert.public_bytes(serialization.Encoding.DER)


def client_certificate(environ):
    """The host's certificate (PEM) from PLUGIN_CLIENT_CERT.

    Raises HandshakeError when it is absent or not a certificate: kmirror's
    host always uses AutoMTLS, and this plugin never serves without TLS.
    """
    client_pem = environ.get("PLUGIN_CLIENT_CERT", "")
    if not client_pem:
        raise HandshakeError(
            "PLUGIN_CLIENT_CERT is not set: kmirror's host always sends its certificate "
            "(go-plugin AutoMTLS), and this plugin does not serve without TLS"
        )
    try:
        x509.load_pem_x509_certificate(client_pem.encode())
    except ValueError as e:
        raise HandshakeError(f"PLUGIN_CLIENT_CERT is not a PEM certificate: {e}") from e
    return client_pem


def tls_context(client_pem, key_pem, cert_pem):
    """The server side of AutoMTLS: our certificate, the host's as the only
    trusted root, a client certificate required, HTTP/2 by ALPN (gRPC
    clients insist on it).

    Python's ssl module (OpenSSL), not gRPC's own TLS: the host's
    certificate has a P-521 key, and the BoringSSL inside grpcio does not
    offer that signature scheme when it asks for a client certificate, so
    the host would send none and the handshake would fail.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=client_pem)
    ctx.set_alpn_protocols(["h2"])
    # load_cert_chain reads files only: a private directory, removed at once.
    with tempfile.TemporaryDirectory(prefix="kmirror-plugin-") as d:
        cert_file, key_file = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        for path, data in ((cert_file, cert_pem), (key_file, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def encode_cert(cert_der):
    """The handshake's SERVER-CERT field: the leaf certificate's DER in
    standard base64 without padding (the line cannot hold PEM's newlines)."""
    return base64.b64encode(cert_der).decode().rstrip("=")


class MTLSFrontend:
    """Terminates the host's mutual TLS on 127.0.0.1 and relays each
    connection, decrypted, to the gRPC server listening on upstream (a Unix
    socket in a private directory). Runs an asyncio loop in its own thread;
    close() stops it and waits for it."""

    def __init__(self, ctx, upstream, log):
        self._ctx = ctx
        self._upstream = upstream
        self._log = log
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(self._on_loop_error)
        self._server = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="mtls-frontend", daemon=True)

    def _on_loop_error(self, _loop, context):
        # Whatever asyncio reports goes out as one JSON line, never the
        # peer's data.
        self._log.warn("connection error", error=str(context.get("exception") or context.get("message")))

    def listen(self, environ):
        """Bind within PLUGIN_MIN_PORT..PLUGIN_MAX_PORT when the host sets a
        range (go-plugin does: 10000..25000 by default), else any free port;
        return the address for the handshake line."""
        lo = int(environ.get("PLUGIN_MIN_PORT", "0") or 0)
        hi = int(environ.get("PLUGIN_MAX_PORT", "0") or 0)
        ports = list(range(lo, hi + 1)) if 0 < lo <= hi else [0]
        if len(ports) > 1:
            # Start at a random port of the range: plugins launched together
            # do not all race for its first ports.
            i = secrets.randbelow(len(ports))
            ports = ports[i:] + ports[:i]
        for port in ports:
            try:
                self._server = self._loop.run_until_complete(
                    asyncio.start_server(self._relay, "127.0.0.1", port, reuse_port=False)
                )
            except OSError:
                continue
            self._thread.start()
            return "127.0.0.1:%d" % self._server.sockets[0].getsockname()[1]
        self._loop.close()
        raise HandshakeError(f"could not listen on 127.0.0.1 in ports {lo}..{hi}")

    async def _relay(self, reader, writer):
        # The handshake is made here rather than by start_server, so that a
        # refused peer (no certificate, or not the host's) is logged.
        try:
            await writer.start_tls(self._ctx)
        except (ssl.SSLError, OSError) as e:
            self._log.warn("refused a connection: TLS handshake failed", error=str(e))
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self._upstream)
        except OSError as e:
            self._log.error("cannot reach the gRPC server", error=str(e))
            writer.close()
            return

        async def pipe(src, dst):
            try:
                while data := await src.read(64 * 1024):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, ssl.SSLError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

    def close(self):
        if self._server is None:
            return

        async def stop():
            self._server.close()
            await self._server.wait_closed()

        if self._thread.is_alive():
            try:
                # Python 3.12 on also waits for open connections; the gRPC
                # server has stopped, so they are closing, but the host's
                # two seconds are the limit either way.
                asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=1)
            except TimeoutError:
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=0.5)
        if not self._thread.is_alive():
            self._loop.close()


def handshake_line(app_version, address, server_cert):
    """The line go-plugin reads on the plugin's stdout."""
    return f"{CORE_PROTOCOL_VERSION}|{app_version}|tcp|{address}|grpc|{server_cert}"


def controller_handler(on_shutdown):
    """plugin.GRPCController, go-plugin's own service: the host calls Shutdown
    (an empty message in, an empty message out) when it stops the plugin, then
    gives the process two seconds to exit before it kills it."""

    def shutdown(_request, _context):
        on_shutdown()
        return b""

    # plugin.Empty has no fields: its encoding is no bytes, so no generated
    # code is needed (gRPC treats a None message as a failure: keep bytes).
    return grpc.method_handlers_generic_handler(
        "plugin.GRPCController",
        {
            "Shutdown": grpc.unary_unary_rpc_method_handler(
                shutdown,
                request_deserializer=bytes,
                response_serializer=bytes,
            )
        },
    )


class JSONLog:
    """Logs hclog-style JSON lines on a stream (stderr): the host parses
    @level, @message and @timestamp and re-logs the other keys as fields,
    under plugin.<kind>.<name>. Values are never secrets: callers log key
    names, counts and reasons only."""

    def __init__(self, stream=None, module="python-groups"):
        self._stream = stream or sys.stderr
        self._module = module
        self._lock = threading.Lock()

    def log(self, level, message, **fields):
        now = datetime.datetime.now(datetime.timezone.utc)
        entry = {
            "@level": level,
            "@message": message,
            # go-plugin parses exactly this layout (microseconds, then Z).
            "@timestamp": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "@module": self._module,
        }
        entry.update(fields)
        line = json.dumps(entry, default=str)
        with self._lock:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                # The host is gone (a broken pipe) or the stream is closed:
                # a log line must never take the plugin down with it.
                pass

    def debug(self, message, **fields):
        self.log("debug", message, **fields)

    def info(self, message, **fields):
        self.log("info", message, **fields)

    def warn(self, message, **fields):
        self.log("warn", message, **fields)

    def error(self, message, **fields):
        self.log("error", message, **fields)
