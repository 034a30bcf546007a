"""Every size limit of placement-core, in one place (a leaf module).

Each limit is far beyond any real cluster or config and low enough that a typo (an extra
digit or ten) or a hostile file is refused at once, with a message naming the limit,
instead of a planner building billions of records or a parser eating the machine.
docs/reference/limits.md lists them for users.
"""

from __future__ import annotations

__all__ = [
    "MAX_ACCELERATORS_PER_NODE",
    "MAX_ACCELERATOR_INDEX",
    "MAX_CONFIG_BYTES",
    "MAX_EXPANDED_RANKS",
    "MAX_IDENTIFIER_CHARS",
    "MAX_INT_DIGITS",
    "MAX_NODES",
    "MAX_PROBLEMS_SHOWN",
    "MAX_PROCESSES",
    "MAX_RANK_DIGITS",
    "MAX_REFERENCE_DEPTH",
    "MAX_RESOLVED_SIZE",
    "MAX_SHOWN_CHARS",
    "MAX_SNAPSHOT_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
]

#: Nodes of a cluster (``num_nodes``); node ranks are below it.
MAX_NODES = 100_000
#: Accelerators of one node (an ``inventory:`` count, a snapshot, ``--accelerators-per-node``).
MAX_ACCELERATORS_PER_NODE = 1024
#: Node ranks that all rank lists of one config name together (each list is expanded,
#: and overlapping lists count each time): ten lists of every node of the largest cluster.
MAX_EXPANDED_RANKS = 10 * MAX_NODES
#: The node-local index of an accelerator (NVML numbers a node's GPUs from 0; planning
#: keys a device by node and index, so an index must stay well inside 24 bits).
MAX_ACCELERATOR_INDEX = 65_535
#: Processes of one plan, all components together; :func:`placement_core.plan` takes
#: ``max_processes=`` (the CLI ``--max-processes``) to change it. Ten times the
#: 1.1 million processes of a 10,000-node x 8 GPU job (planned in about 2 s and 1 GB).
MAX_PROCESSES = 10_000_000
#: Bytes of a config file or YAML text.
MAX_CONFIG_BYTES = 1 << 20
#: Bytes of one node-snapshot JSON file (a 1,024-GPU snapshot is about 0.5 MB).
MAX_SNAPSHOT_BYTES = 4 << 20
#: YAML nodes of one document, aliases counted at the size of what they repeat.
MAX_YAML_NODES = 100_000
#: Nesting of YAML collections (aliases counted at their own depth) and of mappings
#: handed to ``load_config``.
MAX_YAML_DEPTH = 100
#: References followed from one ``${a.b}`` to the value it finally names (a chain
#: ``a: ${b}``, ``b: ${c}``, ... counts each link).
MAX_REFERENCE_DEPTH = 64
#: Characters (of a string) or entries (of mappings and lists) of one value with its
#: ``${a.b}`` references resolved, as large as a whole config file may be.
MAX_RESOLVED_SIZE = MAX_CONFIG_BYTES
#: Digits of an integer written in a config.
MAX_INT_DIGITS = 100
#: Digits of a rank in a rank list or a placement rule.
MAX_RANK_DIGITS = 12
#: Characters of a name a node snapshot reports (an accelerator's ``uuid``, ``model``,
#: ``pci_bus_id``, its fabric's ``cluster_uuid``, ``state``, ``status``; ``hostname``,
#: ``ip``): NVML's are under 100, and such names are quoted whole in warnings.
MAX_IDENTIFIER_CHARS = 256
#: Characters of a value quoted in an error message (longer ones are shortened).
MAX_SHOWN_CHARS = 120
#: Problems of one ConfigError listed in its message (the rest are counted).
MAX_PROBLEMS_SHOWN = 50
