"""Each paper's experiments as recipes: the arms every reproducible figure and table needs at
each budget (quick: CI's slow suite; medium: at most 30 minutes each on a 2-core machine,
sharing runs; paper: the paper's own rounds, seeds and N)."""
