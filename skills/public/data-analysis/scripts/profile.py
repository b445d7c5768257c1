#!/usr/bin/env python3
"""Profile a CSV/TSV file with the standard library only: rows, and per column the inferred
type, missing values, distinct values and numeric min/mean/max."""

import csv
import statistics
import sys

MISSING = {"", "na", "n/a", "nan", "null", "none", "-"}


def number(text):
    try:
        return float(text.replace(",", "")) if text else None
    except ValueError:
        return None


def main(path):
    with open(path, newline="", encoding="utf-8-sig") as handle:
        sample = handle.read(64 * 1024)
        handle.seek(0)
        try:
            dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel
        reader = csv.reader(handle, dialect)
        header = next(reader, None)
        if header is None:
            print("empty file")
            return
        columns = [[] for _ in header]
        rows = 0
        for row in reader:
            rows += 1
            for index, _ in enumerate(header):
                columns[index].append(row[index].strip() if index < len(row) else "")
    print(f"file: {path}\nrows: {rows}\ncolumns: {len(header)}\n")
    for name, values in zip(header, columns):
        present = [v for v in values if v.lower() not in MISSING]
        numbers = [n for n in map(number, present) if n is not None]
        kind = "number" if present and len(numbers) == len(present) else "text"
        line = f"- {name}: {kind}, missing {len(values) - len(present)}, distinct {len(set(present))}"
        if kind == "number" and numbers:
            line += f", min {min(numbers):g}, mean {statistics.fmean(numbers):g}, max {max(numbers):g}"
        elif present:
            common = max(set(present), key=present.count)
            line += f", most common {common!r}"
        print(line)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: profile.py FILE.csv")
    main(sys.argv[1])
