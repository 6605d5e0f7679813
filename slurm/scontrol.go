package slurm

// scontrolShim is the scontrol the wrapper puts first on the script's
// PATH, beside srun: skein's own (`skein scontrol`, which asks the
// cluster), when the node has skein on its PATH; without it, the host
// list commands alone, which need nothing but the job's variables:
// `scontrol show hostnames [LIST]` (LIST: $SLURM_JOB_NODELIST), one name
// a line, ranges keeping the zero padding of their first number.
const scontrolShim = `#!/bin/sh
if command -v skein >/dev/null 2>&1; then
	exec skein scontrol "$@"
fi
case "$1 $2" in
"show hostnames"|"show hostname") ;;
*)
	echo "scontrol: error: skein is not on this node's PATH: only 'scontrol show hostnames' works without it" >&2
	exit 1 ;;
esac
list=${3:-${SLURM_JOB_NODELIST:-}}
[ -n "$list" ] || { echo "scontrol: error: show hostnames: no host list given and no SLURM_JOB_NODELIST" >&2; exit 1; }
printf '%s\n' "$list" | awk '
function expand(s,   o, e, pre, suf, k, r, parts, lh, lo, hi, x, f) {
	if (s == "") return
	o = index(s, "[")
	if (o == 0) { print s; return }
	e = index(s, "]")
	pre = substr(s, 1, o - 1); suf = substr(s, e + 1)
	k = split(substr(s, o + 1, e - o - 1), parts, ",")
	for (r = 1; r <= k; r++) {
		if (split(parts[r], lh, "-") == 2) { lo = lh[1]; hi = lh[2] } else { lo = parts[r]; hi = lo }
		f = "%s%0" length(lo) "d%s\n"
		for (x = lo + 0; x <= hi + 0; x++) printf f, pre, x, suf
	}
}
{
	item = ""; depth = 0
	for (i = 1; i <= length($0); i++) {
		ch = substr($0, i, 1)
		if (ch == "[") depth++
		if (ch == "]") depth--
		if (ch == "," && depth == 0) { expand(item); item = "" } else item = item ch
	}
	expand(item)
}'
`
