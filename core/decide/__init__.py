"""Decide: from ratings to a choice of model, and whether a new version regressed.

Why a package of its own: the report (`core.report`) says how the models
compare; this says which one to ship for a given traffic mix and within given
limits, and how sure that choice is. One concern per module:

- `model`: the pydantic data model; its JSON is the stable shape of
  `lineup decide --json` (and the report's `decision` field);
- `choose`: the arithmetic, a plain function of per-category ratings (with
  their bootstrap rounds, `core.stats.ratings.RatingResult.replicates`) and of the
  report's engineering and check figures: P(best), limits, the
  recommendation, routing, the Pareto frontiers;
- `compare`, `drift`: two runs (or the canary runs) paired unit by unit, with
  their tests, for `lineup diff`, `gate` and `drift`;
- `mix`: the traffic mix, given as shares or read from request logs (the
  strata `lineup sample` computes, `core.exchange.sampling.strata_sizes`).

Reading the store for a decision is the report's (`core.report.decision`), so
this wing sits below the report and never imports it. May import:
`core.ground`, `core.stats`, `core.answering`, `core.exchange`.
"""
