"""The decision: which consumer and share groups have their offsets synced.

Nothing here knows about gRPC: the service (service.py) hands a configuration
block to Rules.from_config and batches of groups to Rules.decide.

A group passes when
  * its id starts with one of the configured prefixes (the `prefixes` key and,
    when `prefixes_file` is set, the lines of that file, read again at every
    call so that another tool can maintain the list), or no prefix is
    configured at all; and
  * its state is not one of `drop_states` (compared case-insensitively;
    default: Dead, a group Kafka is deleting, whose offsets are worth nothing
    on the destination).
"""

import dataclasses

# The configuration schema the plugin declares (kmirror.plugin.config.v1
# Schema): name, type, required, secret, default (as text), description. The
# host checks the plugin's `config:` block against it before Configure;
# validate() below checks it again, as the protocol asks of every plugin.
SCHEMA = (
    {
        "name": "prefixes",
        "type": "string_list",
        "default": "[] (every group id)",
        "description": "Group ids starting with one of these prefixes pass; none configured (here or in prefixes_file): every id passes.",
    },
    {
        "name": "prefixes_file",
        "type": "string",
        "default": "",
        "description": "A file of more prefixes, one a line ('#' starts a comment), read at every call; unreadable: the call fails UNAVAILABLE.",
    },
    {
        "name": "drop_states",
        "type": "string_list",
        "default": '["Dead"]',
        "description": "Group states (as Kafka names them, any case) whose groups never pass.",
    },
)

DEFAULT_DROP_STATES = ("Dead",)


class ConfigProblems(Exception):
    """The configuration is refused: problems is a list of (key, reason).

    A reason never quotes a value: values may be secrets.
    """

    def __init__(self, problems):
        super().__init__("; ".join(f"{k}: {r}" for k, r in problems))
        self.problems = list(problems)


class Unavailable(Exception):
    """The filter cannot decide right now; the host retries next cycle."""


def _type_problem(ftype, value):
    """Why value is not of the schema type ftype, or None."""
    if ftype == "string":
        return None if isinstance(value, str) else "must be a string"
    if ftype == "string_list":
        if not isinstance(value, list):
            return "must be a list of strings"
        for i, item in enumerate(value):
            if not isinstance(item, str):
                return f"must be a list of strings (item {i} is not)"
        return None
    raise ValueError(f"schema type {ftype!r} has no check")


def validate(config):
    """Return the problems of a configuration block, [] when it is valid.

    Checks what the schema says (unknown keys, types) and what it cannot
    (an empty prefix, which would pass every group without saying so).
    """
    if not isinstance(config, dict):
        return [("", "the configuration must be a JSON object")]
    fields = {f["name"]: f for f in SCHEMA}
    problems = []
    for key in sorted(config):
        field = fields.get(key)
        if field is None:
            known = ", ".join(sorted(fields))
            problems.append((key, f"unknown key (known: {known})"))
            continue
        reason = _type_problem(field["type"], config[key])
        if reason:
            problems.append((key, reason))
    if problems:
        return problems
    for i, prefix in enumerate(config.get("prefixes", [])):
        if prefix == "":
            problems.append(("prefixes", f"item {i} is empty, which would pass every group; leave prefixes out instead"))
    if config.get("prefixes_file") == "":
        problems.append(("prefixes_file", "must name a file when set"))
    for i, state in enumerate(config.get("drop_states", [])):
        if state.strip() == "":
            problems.append(("drop_states", f"item {i} is empty"))
    return problems


def read_prefix_file(path):
    """The prefixes of a prefixes_file: one a line, blank lines and '#'
    comments skipped. Raises Unavailable when the file cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        # The error names the file (not a secret) and why, never its content.
        raise Unavailable(f"cannot read prefixes_file {path}: {e.strerror or e}") from e
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


@dataclasses.dataclass(frozen=True)
class Rules:
    """A validated configuration."""

    prefixes: tuple = ()
    prefixes_file: str = ""
    drop_states: frozenset = frozenset(s.lower() for s in DEFAULT_DROP_STATES)

    @classmethod
    def from_config(cls, config):
        """Build Rules from a configuration block; ConfigProblems when it is invalid."""
        problems = validate(config)
        if problems:
            raise ConfigProblems(problems)
        drop = config.get("drop_states", list(DEFAULT_DROP_STATES))
        return cls(
            prefixes=tuple(config.get("prefixes", [])),
            prefixes_file=config.get("prefixes_file", ""),
            drop_states=frozenset(s.strip().lower() for s in drop),
        )

    def matcher(self):
        """A function group -> bool for one call: the prefixes file, if any,
        is read once here so that every chunk of a call sees the same list.
        Raises Unavailable when the file cannot be read."""
        prefixes = self.prefixes
        if self.prefixes_file:
            prefixes = prefixes + tuple(read_prefix_file(self.prefixes_file))
        drop = self.drop_states

        def keep(group_id, state):
            if state.lower() in drop:
                return False
            return not prefixes or group_id.startswith(prefixes)

        return keep

    def decide(self, groups):
        """One flag per (id, state) pair of groups: True when it passes."""
        keep = self.matcher()
        return [keep(gid, state) for gid, state in groups]
