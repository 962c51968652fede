"""Stats: what a vote means and what votes add up to, without a store or a UI.

Owns the vote rules (`votes`: kinds, validation, reveal, the pairwise
decomposition), Bradley-Terry ratings with bootstraps (`ratings`), the
prediction-powered judge fit (`ppi`), the adaptive queue's policy (`adaptive`),
judge calibration, style control, public scores and percentiles
(`quantiles`). May import: `core.ground` and `store` records; never
answering, exchange, decide or report."""
