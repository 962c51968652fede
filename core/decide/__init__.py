"""The decision layer: from ratings to a choice of model (`lineup decide`).

Why a package of its own: the report (`core.report`) says how the models
compare; this says which one to ship for a given traffic mix and within given
limits, and how sure that choice is. One concern per module:

- `model`: the pydantic data model; its JSON is the stable shape of
  `lineup decide --json` (and the report's `decision` field);
- `choose`: the arithmetic, a plain function of per-category ratings (with
  their bootstrap rounds, `core.stats.ratings.RatingResult.replicates`) and of the
  report's engineering and check figures: P(best), limits, the
  recommendation, routing, the Pareto frontiers;
- `build`: reading the store for it (through `core.report`'s own reads);
- `mix`: the traffic mix, given as shares or read from request logs (the
  strata `lineup sample` computes, `core.exchange.sampling.strata_sizes`).

This `__init__` imports nothing, so that `core.report.model` can import
`core.decide.model` without a cycle through the report's builder.
"""
