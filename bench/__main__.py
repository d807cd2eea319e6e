"""``python -m bench``: trio-mcp against the official MCP SDKs, side by side.

Runs each workload against trio-mcp, the TypeScript SDK, the Python SDK
``mcp`` 1.30 (tasks) and 2.x (plain calls only), and a Trio NDJSON echo (the
floor), client and server of the same implementation over stdio, alternating,
``--reps`` times; prints the medians and the ratios as a Markdown table,
then the targets of issue 7. Peers that are not installed show as ``n/a``
with how to install them (``bash bench/setup.sh``). See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from datetime import UTC, datetime

from bench import _report
from bench._runner import WORKLOAD_KEYS, WORKLOADS, discover, run_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes, one repetition (a smoke test, not a measurement)")
    parser.add_argument("--only", action="append", choices=WORKLOAD_KEYS, metavar="WORKLOAD",
                        help=f"run only this workload (repeatable): {', '.join(WORKLOAD_KEYS)}")
    parser.add_argument("--reps", type=int, help="repetitions per implementation (default 3)")
    parser.add_argument("--skip-peers", action="store_true",
                        help="run trio-mcp and the echo floor only")
    parser.add_argument("--json", metavar="PATH", help="also write every raw result to PATH")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="time for the whole run (default 570 s; none with --quick): the "
                        "long peer runs go last and are stopped when it is used up")
    args = parser.parse_args(argv)
    reps = args.reps if args.reps is not None else (1 if args.quick else 3)
    if reps < 1:
        parser.error("--reps must be at least 1")
    workloads = [w for w in WORKLOADS if not args.only or w.key in args.only]

    command = "python -m bench" + "".join(
        f" {shlex.quote(a)}" for a in (argv if argv is not None else sys.argv[1:])
    )
    started = time.monotonic()
    load_before = _report.load()
    impls = discover(args.skip_peers)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    budget = args.budget if args.budget is not None else (None if args.quick else 570.0)
    outcomes = run_all(impls, workloads, reps, args.quick, progress, budget)
    text, notes = _report.table(impls, workloads, outcomes, args.quick)

    print(f"# trio-mcp benchmarks ({'quick sizes, NOT a measurement' if args.quick else 'full'})")
    print()
    print(f"- command: `{command}`")
    print(f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    print(f"- repetitions: {reps} per implementation and workload, alternating; medians shown"
          + ("" if args.quick else " (mcp 1.30: workloads 4-5 once, see bench/README.md)"))
    print(f"- trio-mcp JSON codec: {_report.codec()}")
    for line in _report.machine():
        print(line)
    print(f"- load average before: {load_before}; after: {_report.load()}")
    print(f"- wall time: {time.monotonic() - started:.0f} s")
    print()
    print(text)
    print()
    print("Ratios are \"vs <peer>\": > 1 means trio-mcp is better (faster, or smaller).")
    for i, note in enumerate(notes, 1):
        print(f"[{i}] {note}")
    print()
    print("## Targets (issue 7)")
    print()
    for line in _report.targets(outcomes, args.quick):
        print(line)
    if args.json:
        raw = {
            f"{driver} {impl}": {"results": o.results, "errors": o.errors}
            for (driver, impl), o in outcomes.items()
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(raw, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
