"""Entry point: python -m groupfilter (the launcher kmirror-filter-python-groups
runs it with the plugin's virtualenv). Serves until the host calls
GRPCController.Shutdown or sends SIGTERM."""

import os
import shutil
import signal
import sys
import tempfile
import threading
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kmirror.plugin.config.v1 import config_pb2_grpc
from kmirror.plugin.filter.v1 import filter_pb2_grpc

from groupfilter import goplugin, service

# The filter protocol majors this plugin speaks, offered to the host's
# PLUGIN_PROTOCOL_VERSIONS.
SUPPORTED_VERSIONS = (service.PROTOCOL_MAJOR,)

# How long a graceful stop lets calls in flight finish; the host kills the
# process two seconds after Shutdown.
STOP_GRACE_SECONDS = 1.0


# The private directories of the gRPC socket: PRIVATE_PREFIX<pid>-<random>.
PRIVATE_PREFIX = "kmirror-python-groups-"


def sweep_stale_dirs(parent):
    """Remove the private directories that killed instances left behind:
    those of this user whose process is gone. A graceful stop removes its own."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(PRIVATE_PREFIX):
            continue
        pid = name[len(PRIVATE_PREFIX):].split("-", 1)[0]
        path = os.path.join(parent, name)
        try:
            if not pid.isdigit() or os.lstat(path).st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def main():
    log = goplugin.JSONLog()
    try:
        goplugin.check_cookie(os.environ)
    except goplugin.HandshakeError as e:
        print(e, file=sys.stderr)
        return 1
    version, agreed = goplugin.negotiate_version(os.environ, SUPPORTED_VERSIONS)
    if not agreed:
        log.warn("the host speaks none of this plugin's protocol versions; it will refuse the plugin",
                 ours=list(SUPPORTED_VERSIONS), host=os.environ.get("PLUGIN_PROTOCOL_VERSIONS", ""))

    stop = threading.Event()
    # A Ctrl-C in the operator's terminal reaches the whole process group;
    # the host decides when its plugins stop, so SIGINT is ignored (as
    # go-plugin's Go servers do). SIGTERM stops gracefully.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    state = service.State()
    config_pb2_grpc.add_ConfigServicer_to_server(service.ConfigService(state, log), server)
    filter_pb2_grpc.add_FilterServicer_to_server(service.FilterService(state, log), server)
    checker = health.HealthServicer()
    checker.set("plugin", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    server.add_generic_rpc_handlers((goplugin.controller_handler(stop.set),))

    try:
        client_pem = goplugin.client_certificate(os.environ)
    except goplugin.HandshakeError as e:
        log.error("cannot serve", error=str(e))
        return 1
    # gRPC serves plaintext on a Unix socket only this user can reach; the
    # host connects to the TLS frontend, which relays to it.
    sweep_stale_dirs(tempfile.gettempdir())
    private = tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-")
    try:
        upstream = os.path.join(private, "grpc.sock")
        if not server.add_insecure_port("unix:" + upstream):
            log.error("cannot serve", error="gRPC could not listen on " + upstream)
            return 1
        server.start()
        key_pem, cert_pem, cert_der = goplugin.self_signed_cert()
        frontend = goplugin.MTLSFrontend(goplugin.tls_context(client_pem, key_pem, cert_pem), upstream, log)
        try:
            address = frontend.listen(os.environ)
        except goplugin.HandshakeError as e:
            log.error("cannot serve", error=str(e))
            return 1
        log.info("serving", address=address, protocol_version=version, pid=os.getpid())
        # The handshake line is the only thing this process writes on stdout.
        sys.stdout.write(goplugin.handshake_line(version, address, goplugin.encode_cert(cert_der)) + "\n")
        sys.stdout.flush()

        stop.wait()
        log.info("shutting down")
        checker.enter_graceful_shutdown()
        server.stop(STOP_GRACE_SECONDS).wait()
        frontend.close()
        return 0
    finally:
        shutil.rmtree(private, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
