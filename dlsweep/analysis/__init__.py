"""Analysis of sweep datasets: incremental-learning thresholds (`incremental`) and the theory of
Gissin et al. 2020 beside them (`theory`)."""
