"""Run a Python script under ``cProfile`` with CPU time, dumping the stats when it exits.

``python -m bench._cprofiled OUT.prof SCRIPT [ARGS...]`` (used by ``bench.stores_profile``).
Only the main thread is profiled; ``py-spy`` (``--profiler pyspy``) sees every thread.
"""

from __future__ import annotations

import cProfile
import runpy
import sys
import time


def main() -> None:
    out, script, *rest = sys.argv[1:]
    sys.argv = [script, *rest]
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        profiler.disable()
        profiler.dump_stats(out)


if __name__ == "__main__":
    main()
