"""The plugin's gRPC services: kmirror.plugin.config.v1.Config and
kmirror.plugin.filter.v1.Filter (sdk/proto), over the rules of rules.py."""

import json
import threading

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from kmirror.plugin.config.v1 import config_pb2, config_pb2_grpc
from kmirror.plugin.filter.v1 import filter_pb2, filter_pb2_grpc

from groupfilter import rules

NAME = "python-groups"
VERSION = "0.1.0"
# The filter protocol this plugin implements (filter.proto: version 1.0).
PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 0

FILTER_DOMAIN = "kmirror.plugin.filter.v1"
CONFIG_DOMAIN = "kmirror.plugin.config.v1"


def status(code, message, *details):
    """A grpc.Status with google.rpc details, for context.abort_with_status."""
    packed = []
    for d in details:
        a = any_pb2.Any()
        a.Pack(d)
        packed.append(a)
    return rpc_status.to_status(status_pb2.Status(code=code, message=message, details=packed))


def filter_error(code, reason, message):
    """A typed filter error: the host matches reason (filter.proto's table)
    to the sdk/filter sentinel, so errors.Is works there."""
    return status(code, message, error_details_pb2.ErrorInfo(reason=reason, domain=FILTER_DOMAIN))


def config_refused(problems):
    """Configure's refusal: INVALID_ARGUMENT with a google.rpc.BadRequest
    naming each key; the host prefixes them with plugins.<name>.config."""
    text = "invalid plugin configuration: " + "; ".join(f"{k}: {r}" for k, r in problems)
    bad = error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=k, description=r) for k, r in problems
        ]
    )
    info = error_details_pb2.ErrorInfo(reason="INVALID_CONFIG", domain=CONFIG_DOMAIN)
    return status(code_pb2.INVALID_ARGUMENT, text, bad, info)


class State:
    """The plugin's configuration, set once by Configure."""

    def __init__(self):
        self._lock = threading.Lock()
        self._rules = None
        self.name = ""

    def configure(self, name, r):
        with self._lock:
            if self._rules is not None:
                return False
            self._rules, self.name = r, name
            return True

    def rules(self):
        with self._lock:
            return self._rules


class ConfigService(config_pb2_grpc.ConfigServicer):
    """kmirror.plugin.config.v1.Config."""

    def __init__(self, state, log):
        self._state = state
        self._log = log

    def Schema(self, request, context):
        return config_pb2.SchemaResponse(
            fields=[
                config_pb2.Field(
                    name=f["name"], type=f["type"], required=f.get("required", False),
                    secret=f.get("secret", False), default=f.get("default", ""),
                    description=f.get("description", ""),
                )
                for f in rules.SCHEMA
            ]
        )

    def Configure(self, request, context):
        raw = request.config_json or b"{}"
        try:
            cfg = json.loads(raw)
        except ValueError as e:
            context.abort_with_status(
                status(code_pb2.INVALID_ARGUMENT, f"plugin configuration is not a JSON object: {e.msg}")
            )
        try:
            r = rules.Rules.from_config(cfg)
        except rules.ConfigProblems as e:
            self._log.warn("configuration refused", keys=[k for k, _ in e.problems])
            context.abort_with_status(config_refused(e.problems))
        if not self._state.configure(request.name, r):
            context.abort_with_status(
                status(code_pb2.FAILED_PRECONDITION, "plugin: already configured (Configure is called once per process)")
            )
        self._log.info(
            "configured", name=request.name, prefixes=len(r.prefixes),
            prefixes_file=bool(r.prefixes_file), drop_states=sorted(r.drop_states),
        )
        return config_pb2.ConfigureResponse()


class FilterService(filter_pb2_grpc.FilterServicer):
    """kmirror.plugin.filter.v1.Filter: decides about groups only."""

    def __init__(self, state, log):
        self._state = state
        self._log = log

    def Info(self, request, context):
        return filter_pb2.InfoResponse(
            name=NAME, version=VERSION, protocol_major=PROTOCOL_MAJOR,
            protocol_minor=PROTOCOL_MINOR, kinds=[filter_pb2.KIND_GROUPS],
        )

    def FilterGroups(self, request_iterator, context):
        r = self._state.rules()
        if r is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "plugin: not configured yet (the host calls Configure first)")
        try:
            keep = r.matcher()
        except rules.Unavailable as e:
            self._log.warn("cannot decide", reason=str(e))
            context.abort_with_status(filter_error(code_pb2.UNAVAILABLE, "UNAVAILABLE", str(e)))
        # Item by item: each chunk is answered as soon as it is read (the
        # host sends every chunk without waiting, so this cannot block it).
        kept = total = 0
        mirror = ""
        for req in request_iterator:
            mirror = req.mirror
            flags = [keep(g.id, g.state) for g in req.groups]
            kept += sum(flags)
            total += len(flags)
            yield filter_pb2.FilterResponse(kept=flags)
        self._log.debug("groups decided", mirror=mirror, groups=total, kept=kept)

    def _unsupported(self, context, kind):
        context.abort_with_status(
            filter_error(code_pb2.UNIMPLEMENTED, "UNSUPPORTED_KIND", f"filter {NAME}: decides about groups only, not {kind}")
        )

    def FilterTopics(self, request_iterator, context):
        self._unsupported(context, "topics")

    def FilterACLs(self, request_iterator, context):
        self._unsupported(context, "ACL bindings")
