"""How long a meta-eval's metrics take for 30,000 rows (the official file has 29,511).

Run by hand: `.venv/bin/python bench/bench_meta_eval.py [--rows 30000]`. Prints figures, asserts
nothing. Target: under 2 s end to end, from the stored rows to the report `hbtui show` prints:
the rows read from SQLite, the grader's and every physician's pairwise metrics, the row
aggregates with their bootstraps, the physicians' distribution and the majority vote.

Rows are written for the benchmark (the real file is not on the build machines), shaped like
the real ones: one to five physicians' labels per row out of 250 physicians, 34 categories.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hbtui.core.settings.config import Settings
from hbtui.meta_eval.metrics import model_agreement, physician_agreement
from hbtui.meta_eval.plan import plan_meta_eval
from hbtui.meta_eval.summary import current_summary, labelled_rows
from hbtui.store import Store
from tests.support.meta_rows import meta_rows, write_rows

CATEGORIES = tuple(f"cluster_{i:02d}_category" for i in range(34))


async def bench(rows: int, repeats: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="hbtui-bench-meta-"))
    try:
        data = write_rows(folder / "meta.jsonl", meta_rows(rows, physicians=250, labels=(1, 5), categories=CATEGORIES))
        settings = Settings(db_path=str(folder / "hbtui.sqlite"), model_grader="g", base_url="http://127.0.0.1:9/v1")
        async with await Store.open(settings.db_path) as store:
            started = time.perf_counter()
            run_id = await plan_meta_eval(store, settings, data, official=False, limit=None, seed=0, name="bench")
            planned = time.perf_counter() - started
            # Every row judged, half of them met, as a finished run holds them.
            await store.db.execute(
                "UPDATE meta_eval_rows SET status = CASE WHEN position % 2 THEN 'met' ELSE 'not_met' END"
            )
            await store.db.commit()
            run = await store.get_run(run_id)
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                summary = await current_summary(store, run, labels_over=50)
                times.append(time.perf_counter() - started)
            stored = await store.meta_eval_labels(run_id)
        labelled = labelled_rows(stored)
        started = time.perf_counter()
        model_agreement(labelled)
        physician_agreement(labelled)
        pairwise = time.perf_counter() - started
        assert summary is not None
        print(f"rows: {rows:,}; file {data.stat().st_size / 1e6:.1f} MB; planned into the store in {planned:.2f} s")
        print(f"metrics end to end (store -> report): best {min(times):.3f} s, worst {max(times):.3f} s of {repeats}")
        print(f"  of which the pairwise metrics (grader and every physician): {pairwise:.3f} s")
        print(f"  report size {len(json.dumps(summary)) / 1e3:.0f} kB; target < 2 s")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(bench(args.rows, args.repeats))


if __name__ == "__main__":
    main()
