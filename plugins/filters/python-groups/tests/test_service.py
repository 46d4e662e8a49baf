"""The config and filter services over a real gRPC connection (in process,
without TLS): what the host sees of them."""

import io
import json
import os
import tempfile
import unittest
from concurrent import futures

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from kmirror.plugin.config.v1 import config_pb2, config_pb2_grpc
from kmirror.plugin.filter.v1 import filter_pb2, filter_pb2_grpc

from groupfilter import goplugin, service


def details(err):
    """The google.rpc details of a failed call, by type."""
    st = rpc_status.from_call(err)
    out = []
    for d in st.details if st else []:
        for cls in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest):
            if d.Is(cls.DESCRIPTOR):
                m = cls()
                d.Unpack(m)
                out.append(m)
    return out


class ServiceTest(unittest.TestCase):
    def setUp(self):
        self.logs = io.StringIO()
        log = goplugin.JSONLog(stream=self.logs)
        state = service.State()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        config_pb2_grpc.add_ConfigServicer_to_server(service.ConfigService(state, log), self.server)
        filter_pb2_grpc.add_FilterServicer_to_server(service.FilterService(state, log), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.addCleanup(self.server.stop, None)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.addCleanup(self.channel.close)
        self.config = config_pb2_grpc.ConfigStub(self.channel)
        self.filter = filter_pb2_grpc.FilterStub(self.channel)

    def configure(self, cfg):
        return self.config.Configure(config_pb2.ConfigureRequest(name="py", config_json=json.dumps(cfg).encode()))

    def filter_groups(self, *chunks):
        reqs = [
            filter_pb2.FilterGroupsRequest(mirror="dc1", groups=[filter_pb2.Group(id=i, kind="consumer", state=s) for i, s in chunk])
            for chunk in chunks
        ]
        return [list(r.kept) for r in self.filter.FilterGroups(iter(reqs))]

    def test_schema_lists_every_key(self):
        resp = self.config.Schema(config_pb2.SchemaRequest())
        self.assertEqual([(f.name, f.type) for f in resp.fields], [("prefixes", "string_list"), ("prefixes_file", "string"), ("drop_states", "string_list")])
        self.assertTrue(all(f.description for f in resp.fields))

    def test_configure_refusal_names_each_key_in_a_bad_request(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.configure({"colour": "red", "prefixes": [""]})
        err = cm.exception
        self.assertEqual(err.code(), grpc.StatusCode.INVALID_ARGUMENT)
        got = details(err)
        bad = [d for d in got if isinstance(d, error_details_pb2.BadRequest)]
        self.assertEqual(len(bad), 1)
        self.assertEqual([v.field for v in bad[0].field_violations], ["colour"])
        info = [d for d in got if isinstance(d, error_details_pb2.ErrorInfo)]
        self.assertEqual([(i.domain, i.reason) for i in info], [("kmirror.plugin.config.v1", "INVALID_CONFIG")])
        self.assertNotIn("red", err.details())
        self.assertIn('"@message": "configuration refused"', self.logs.getvalue())

    def test_configure_refuses_a_value_the_schema_allows(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.configure({"prefixes": ["a-", ""]})
        bad = [d for d in details(cm.exception) if isinstance(d, error_details_pb2.BadRequest)]
        self.assertEqual([(v.field, v.description) for v in bad[0].field_violations],
                         [("prefixes", "item 1 is empty, which would pass every group; leave prefixes out instead")])

    def test_configure_not_json(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.config.Configure(config_pb2.ConfigureRequest(name="py", config_json=b"{nope"))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("not a JSON object", cm.exception.details())

    def test_configure_twice_is_a_failed_precondition(self):
        self.configure({})
        with self.assertRaises(grpc.RpcError) as cm:
            self.configure({})
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)

    def test_empty_config_json_means_no_keys(self):
        self.config.Configure(config_pb2.ConfigureRequest(name="py"))
        self.assertEqual(self.filter_groups([("a", "Stable"), ("b", "Dead")]), [[True, False]])

    def test_filter_before_configure_is_a_failed_precondition(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.filter_groups([("a", "Stable")])
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)

    def test_info(self):
        info = self.filter.Info(filter_pb2.InfoRequest())
        self.assertEqual((info.name, info.protocol_major, info.protocol_minor, list(info.kinds)),
                         ("python-groups", 1, 0, [filter_pb2.KIND_GROUPS]))

    def test_one_answer_per_chunk_in_order(self):
        self.configure({"prefixes": ["keep-"]})
        got = self.filter_groups(
            [("keep-1", "Stable"), ("drop-1", "Stable")],
            [],
            [("keep-2", "Dead"), ("keep-3", "Empty"), ("x", "Empty")],
        )
        self.assertEqual(got, [[True, False], [], [False, True, False]])

    def test_unreadable_prefixes_file_is_a_typed_unavailable(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "missing")
            self.configure({"prefixes_file": path})
            with self.assertRaises(grpc.RpcError) as cm:
                self.filter_groups([("a", "Stable")])
        err = cm.exception
        self.assertEqual(err.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn("cannot read prefixes_file " + path, err.details())
        self.assertEqual([(i.domain, i.reason) for i in details(err)], [("kmirror.plugin.filter.v1", "UNAVAILABLE")])

    def test_other_kinds_are_typed_unsupported(self):
        self.configure({})
        with self.assertRaises(grpc.RpcError) as cm:
            list(self.filter.FilterTopics(iter([filter_pb2.FilterTopicsRequest(mirror="dc1")])))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertEqual([(i.domain, i.reason) for i in details(cm.exception)], [("kmirror.plugin.filter.v1", "UNSUPPORTED_KIND")])


if __name__ == "__main__":
    unittest.main()
