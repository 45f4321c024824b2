"""Reading a seams.yaml: YAML's safe subset, without the two features that turn a short file into
a surprise.

- **Aliases** (`*name`) are refused: a few lines of nested aliases (a "billion laughs") expand
  to gigabytes in memory, and settings never need them (write the value out). Anchors alone
  (`&name`) are harmless and allowed.
- **Duplicate keys** are refused, naming the key and both lines: YAML's loaders silently keep
  the last, so a second `collections:` block (or a collection named twice) would drop the first
  without a word.
"""

from __future__ import annotations

from typing import Any

import yaml


class _StrictLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` refusing aliases and duplicate mapping keys."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"alias *{event.anchor} is not allowed in settings: write the value out",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class says so
                    break
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {key!r} (first at line {first.line + 1}): keep one",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def load_settings_yaml(text: str) -> Any:
    """The YAML document in `text`, parsed safely (`yaml.safe_load`'s types), with aliases and
    duplicate keys refused (`yaml.YAMLError` naming the line)."""
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary types
