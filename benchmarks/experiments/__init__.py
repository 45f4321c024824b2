"""One-off measurements kept for their findings, not maintained with the product.

The maintained suite sits one level up in `benchmarks/`: the scripts the README and the
benchmarks pages in `docs/` cite, re-run when the code they measure changes. The scripts here
answered one question at one time (the lexical index's write cost, search latency during a
backfill, the Dagster UI's overhead); they may lag behind the product's internals. Run one as
`python -m benchmarks.experiments.NAME`; their results sit in `benchmarks/experiments/results/`.
"""
