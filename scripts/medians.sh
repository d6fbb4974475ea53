# Shared by the timing scripts (`source`d, not run): the median and the fastest of a
# space-separated list of numbers.
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
fastest() { tr ' ' '\n' <<<"$1" | grep . | sort -n | head -1; }
