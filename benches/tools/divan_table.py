#!/usr/bin/env python3
"""Turns divan's tree output (stdin) into one tab-separated row per measured leaf:
path, median time, then the median of each counter line (e.g. MB/s, item/s).

  cargo bench --bench put | python3 benches/tools/divan_table.py
"""
import re
import sys

rows, path, last = [], [], None
for line in sys.stdin.read().splitlines():
    m = re.search(r"[├╰]─ (\S+)", line)
    if m:
        depth = m.start() // 3
        path = path[:depth] + [m.group(1)]
        cols = line[m.end():].split("│")
        last = None
        if len(cols) >= 3 and cols[2].strip():
            last = ["/".join(path), cols[2].strip()]
            rows.append(last)
        continue
    if last is not None and "/s" in line:
        # Counter lines: the tree prefix, then fastest, slowest, median, mean.
        cols = re.sub(r"^[│\s]+", "", line).split("│")
        if len(cols) >= 4:
            last.append(cols[2].strip())
for r in rows:
    print("\t".join(r))
