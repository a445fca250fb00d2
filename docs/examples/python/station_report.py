#!/usr/bin/env python3
"""Missions per station over a period, read twice: through GraphQL and through the CSV export.

The record count per station comes from the GraphQL endpoint (`unique_counts` on /graphql); the
mean response time and the share of patients transported come from the rows of the CSV export
(/v1/reports/main-report/export), aggregated with pandas. The two routes must agree on the number
of records per station; the script says so and exits 1 when they do not.

    export EMSQUERY_API_KEY=$(cat .demo/api-key)          # after make demo
    python3 docs/examples/python/station_report.py --start 2025-03-01 --end 2025-03-31

Needs pandas and requests (Debian: apt-get install python3-pandas python3-requests). The key is
read from the environment, not the command line, where other users of the machine could see it.
"""

import argparse
import io
import os
import sys

import pandas as pd
import requests

NO_STATION = "(no station)"

COUNTS = """
query StationCounts($start: String!, $end: String!) {
  unique_counts(columns: ["station"], start_date: $start, end_date: $end) { value count }
}
"""


def graphql_counts(session, url, start, end):
    """Records per station from /graphql, as a Series indexed by station."""
    resp = session.post(url + "/graphql", json={"query": COUNTS, "variables": {"start": start, "end": end}}, timeout=60)
    body = resp.json()
    if resp.status_code != 200 or body.get("errors"):
        sys.exit(f"GraphQL answered {resp.status_code}: {body.get('errors')}")
    rows = body["data"]["unique_counts"]
    # value is null for the records without a station.
    return pd.Series({(r["value"] if r["value"] is not None else NO_STATION): r["count"] for r in rows}, dtype="int64")


def export_rows(session, url, key, start, end):
    """The main report's rows for the period, from the CSV export, as a DataFrame."""
    resp = session.get(
        url + "/v1/reports/main-report/export",
        params={"start_date": start, "end_date": end},
        # The export wants the key in SERVICE-X-API-KEY too.
        headers={"SERVICE-X-API-KEY": key},
        timeout=300,
    )
    if resp.status_code != 200:
        sys.exit(f"export answered {resp.status_code}: {resp.text[:500]}")
    return pd.read_csv(
        io.BytesIO(resp.content),
        encoding="utf-8",
        # NULL is an empty field. Nothing else is missing: a station may well be called "NA".
        keep_default_na=False,
        na_values=[""],
        dtype={"station": "string", "municipality": "string", "callsign": "string"},
        true_values=["true"],
        false_values=["false"],
    )


def report(counts, rows):
    """One line per station: records by each route, mean response time, transported share."""
    rows = rows.assign(station=rows["station"].fillna(NO_STATION))
    by_station = rows.groupby("station", dropna=False)
    transported = rows["transported"].map({True: 1.0, False: 0.0})  # unknown stays NaN
    table = pd.DataFrame(
        {
            "records_graphql": counts,
            "records_csv": by_station.size(),
            "mean_response_s": by_station["response_time_s"].mean().round(1),
            "transported_share": transported.groupby(rows["station"]).mean().round(3),
        }
    )
    table.index.name = "station"
    table[["records_graphql", "records_csv"]] = table[["records_graphql", "records_csv"]].fillna(0).astype("int64")
    return table.sort_values(["records_graphql"], ascending=False, kind="stable")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:9090", help="the service, without a path (default %(default)s)")
    p.add_argument("--key-header", default="x-api-key", help="AUTHENTICATION__API_KEY_HEADER (default %(default)s)")
    p.add_argument("--start", required=True, help="first day, YYYY-MM-DD")
    p.add_argument("--end", required=True, help="last day, YYYY-MM-DD")
    p.add_argument("--format", choices=["table", "tsv"], default="table", help="table for reading, tsv for a program")
    args = p.parse_args()
    key = os.environ.get("EMSQUERY_API_KEY")
    if not key:
        sys.exit("set EMSQUERY_API_KEY to the service's API key")
    url = args.url.rstrip("/")

    with requests.Session() as session:
        session.headers[args.key_header] = key
        counts = graphql_counts(session, url, args.start, args.end)
        rows = export_rows(session, url, key, args.start, args.end)
    table = report(counts, rows)

    if args.format == "tsv":
        table.to_csv(sys.stdout, sep="\t", lineterminator="\n")
    else:
        with pd.option_context("display.width", 120, "display.max_rows", None):
            print(f"Missions {args.start} to {args.end}: {len(rows)} records")
            print(table.to_string())
    if not (table["records_graphql"] == table["records_csv"]).all():
        sys.exit("GraphQL and the CSV export disagree on the records per station")


if __name__ == "__main__":
    main()
