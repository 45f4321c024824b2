"""Seams' benchmarks: the maintained suite here, one-off studies in `benchmarks.experiments`.

Every module at this level is cited by the README or the benchmarks pages in `docs/` (or is a
helper of one) and writes its results to `benchmarks/results/`; each result JSON opens with the
run's header (`benchmarks.header`: command, commit, date, machine).
"""
