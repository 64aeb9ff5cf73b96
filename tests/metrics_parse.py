#!/usr/bin/env python3
"""Parse a Prometheus text exposition (stdin) with the official Python client's parser
(prometheus_client.parser) and print it as JSON: {family: {"type", "help", "samples":
[[name, labels, value], ...]}}. A text the parser rejects exits 1 with its error."""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    text = sys.stdin.read()
    out = {}
    try:
        for family in text_string_to_metric_families(text):
            out[family.name] = {
                "type": family.type,
                "help": family.documentation,
                "samples": [[s.name, s.labels, s.value] for s in family.samples],
            }
    except Exception as e:  # the parser's own error: the exposition is not valid
        print(f"not a valid Prometheus text exposition: {e}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
