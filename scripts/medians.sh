# Shared by the timing scripts (`source`d, not run): the median and the fastest of a
# space-separated list of numbers, and the median ratio of two such lists taken round by round.
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
fastest() { tr ' ' '\n' <<<"$1" | grep . | sort -n | head -1; }
# The median over rounds of the second list's number divided by the first's, both lists in
# round order: a ratio taken within each round, so that the machine's drift from one round to
# the next (on a shared machine, the largest part of the spread) cancels out.
ratio_by_round() {
    paste -d' ' <(tr ' ' '\n' <<<"$1" | grep .) <(tr ' ' '\n' <<<"$2" | grep .) |
        awk '{print $2 / $1}' | sort -n | awk '{v[NR] = $1} END {printf "%.2fx", v[int((NR + 1) / 2)]}'
}
