"""The decision and the configuration schema, without gRPC."""

import os
import re
import tempfile
import unittest

from groupfilter import rules


class SchemaTest(unittest.TestCase):
    def test_schema_is_one_a_host_accepts(self):
        # The host refuses a schema with a bad or repeated name or an
        # unknown type (sdk/plugin.Schema.Check).
        types = {"string", "int", "bool", "duration", "string_list", "object"}
        names = [f["name"] for f in rules.SCHEMA]
        self.assertEqual(len(names), len(set(names)))
        for f in rules.SCHEMA:
            self.assertRegex(f["name"], r"^[a-z0-9][a-z0-9_.-]*$")
            self.assertIn(f["type"], types)
            self.assertTrue(f["description"])

    def test_every_schema_key_is_accepted(self):
        cfg = {"prefixes": ["a-"], "prefixes_file": "/p", "drop_states": ["Dead", "Empty"]}
        self.assertEqual(rules.validate(cfg), [])
        self.assertEqual(set(cfg), {f["name"] for f in rules.SCHEMA})

    def test_unknown_key_is_named_with_the_known_ones(self):
        self.assertEqual(
            rules.validate({"colour": "red", "prefixes": []}),
            [("colour", "unknown key (known: drop_states, prefixes, prefixes_file)")],
        )

    def test_wrong_types_are_named_without_their_values(self):
        problems = rules.validate({"prefixes": "orders-", "prefixes_file": 3, "drop_states": ["Dead", 7]})
        self.assertEqual(
            problems,
            [
                ("drop_states", "must be a list of strings (item 1 is not)"),
                ("prefixes", "must be a list of strings"),
                ("prefixes_file", "must be a string"),
            ],
        )
        for _, reason in problems:
            self.assertNotIn("orders-", reason)

    def test_values_the_schema_cannot_refuse(self):
        self.assertEqual(
            rules.validate({"prefixes": ["a-", ""], "prefixes_file": "", "drop_states": [" "]}),
            [
                ("prefixes", "item 1 is empty, which would pass every group; leave prefixes out instead"),
                ("prefixes_file", "must name a file when set"),
                ("drop_states", "item 0 is empty"),
            ],
        )

    def test_not_an_object(self):
        self.assertEqual(rules.validate([1]), [("", "the configuration must be a JSON object")])

    def test_from_config_raises_the_problems(self):
        with self.assertRaises(rules.ConfigProblems) as cm:
            rules.Rules.from_config({"nope": 1})
        self.assertEqual([k for k, _ in cm.exception.problems], ["nope"])
        self.assertIn("nope: unknown key", str(cm.exception))


def groups(*pairs):
    return list(pairs)


class DecideTest(unittest.TestCase):
    def test_defaults_keep_every_group_but_dead_ones(self):
        r = rules.Rules.from_config({})
        self.assertEqual(
            r.decide([("a", "Stable"), ("b", "Dead"), ("", "Empty"), ("c", "dead")]),
            [True, False, True, False],
        )

    def test_prefixes(self):
        r = rules.Rules.from_config({"prefixes": ["orders-", "billing-"]})
        self.assertEqual(
            r.decide([("orders-eu", "Stable"), ("billing-1", "Empty"), ("payments", "Stable"), ("orders", "Stable"), ("orders-x", "Dead")]),
            [True, True, False, False, False],
        )

    def test_drop_states_replace_the_default_and_ignore_case(self):
        r = rules.Rules.from_config({"drop_states": ["empty", "PreparingRebalance"]})
        self.assertEqual(
            r.decide([("a", "Empty"), ("b", "Dead"), ("c", "preparingrebalance"), ("d", "Stable")]),
            [False, True, False, True],
        )

    def test_empty_drop_states_drop_nothing(self):
        r = rules.Rules.from_config({"drop_states": []})
        self.assertEqual(r.decide([("a", "Dead")]), [True])

    def test_empty_batch(self):
        self.assertEqual(rules.Rules.from_config({"prefixes": ["a"]}).decide([]), [])


class PrefixFileTest(unittest.TestCase):
    def setUp(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        self.path = os.path.join(d.name, "prefixes")

    def write(self, text):
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(text)

    def test_file_prefixes_add_to_the_configured_ones_and_are_read_at_each_call(self):
        self.write("# team list\naudit-   # the auditors\n\n  ops-\n")
        r = rules.Rules.from_config({"prefixes": ["orders-"], "prefixes_file": self.path})
        batch = [("orders-1", "Stable"), ("audit-1", "Stable"), ("ops-1", "Stable"), ("dev-1", "Stable")]
        self.assertEqual(r.decide(batch), [True, True, True, False])
        self.write("dev-\n")
        self.assertEqual(r.decide(batch), [True, False, False, True])

    def test_a_file_of_comments_only_keeps_every_group(self):
        self.write("# nothing yet\n")
        r = rules.Rules.from_config({"prefixes_file": self.path})
        self.assertEqual(r.decide([("x", "Stable")]), [True])

    def test_missing_file_is_unavailable_naming_it(self):
        r = rules.Rules.from_config({"prefixes_file": self.path})
        with self.assertRaises(rules.Unavailable) as cm:
            r.decide([("x", "Stable")])
        self.assertTrue(re.search(r"cannot read prefixes_file .*/prefixes: ", str(cm.exception)), str(cm.exception))


if __name__ == "__main__":
    unittest.main()
