"""Queries the tables of `gaspard export --format parquet` with DuckDB and
prints the results as JSON, for the export tests.

usage: python3 query.py DIR   (DIR holds events.parquet and communication.parquet)
"""
import json
import sys

import duckdb

d = sys.argv[1]
ev = f"read_parquet('{d}/events.parquet')"
cm = f"read_parquet('{d}/communication.parquet')"
con = duckdb.connect()


def rows(sql):
    return [list(r) for r in con.sql(sql).fetchall()]


print(json.dumps({
    "events": rows(f"SELECT count(*) FROM {ev}")[0][0],
    "per_thread": rows(f"SELECT process, thread, count(*) FROM {ev} GROUP BY ALL ORDER BY ALL"),
    "by_event": rows(
        f"""SELECT kind, count(*), coalesce(sum(dur_ns), 0) FROM {ev}
            WHERE phase IN ('START', 'ATOMIC')
              AND kind NOT IN ('GASPARD_INIT', 'GASPARD_MEASUREMENT', 'GASPARD_LOST', 'GASPARD_CLOCK_SYNC')
            GROUP BY kind ORDER BY kind"""),
    "by_callsite": rows(
        f"""SELECT file, line, kind, count(*), coalesce(sum(dur_ns), 0) FROM {ev}
            WHERE phase = 'START' AND file IS NOT NULL GROUP BY ALL ORDER BY ALL"""),
    "unmatched": rows(
        f"SELECT count(*) FROM {ev} WHERE phase = 'START' AND dur_ns IS NULL")[0][0],
    "matrix": rows(
        f"""SELECT model, src_rank, dst_rank, count(*), sum(bytes), sum(t_end - t_start)
            FROM {cm} GROUP BY ALL ORDER BY ALL"""),
    "comm_dst_known": rows(
        f"SELECT count(*) FILTER (WHERE dst_thread IS NULL), count(*) FROM {cm}")[0],
    "objects": rows(
        f"""SELECT object, kind, count(*), sum(bytes), min(object_offset), max(object_offset)
            FROM {cm} WHERE object IS NOT NULL GROUP BY ALL ORDER BY ALL"""),
}))
