package structs

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxHostListNames is the most names ExpandHostList makes of one list.
const MaxHostListNames = 65536

// HostList renders node names as Slurm's compressed host list, sorted:
// names that differ only in a trailing number of one width share
// brackets, "gpu[1-3,5],login". Each name appears once.
func HostList(names []string) string {
	type group struct {
		prefix string
		width  int
		nums   []int
	}
	var groups []*group
	var plain []string
	find := map[string]*group{}
	for _, n := range names {
		i := len(n)
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		num, err := strconv.Atoi(n[i:])
		if i == len(n) || err != nil || len(n)-i > 9 {
			plain = append(plain, n)
			continue
		}
		width := len(n) - i
		if n[i] != '0' || width == 1 {
			width = 0 // no zero padding to keep
		}
		key := n[:i] + "\x00" + strconv.Itoa(width)
		g := find[key]
		if g == nil {
			g = &group{prefix: n[:i], width: width}
			find[key] = g
			groups = append(groups, g)
		}
		g.nums = append(g.nums, num)
	}
	var out []string
	for _, g := range groups {
		slices.Sort(g.nums)
		g.nums = slices.Compact(g.nums)
		if len(g.nums) == 1 {
			out = append(out, fmt.Sprintf("%s%0*d", g.prefix, g.width, g.nums[0]))
			continue
		}
		out = append(out, g.prefix+"["+NumberRanges(g.nums, g.width)+"]")
	}
	slices.Sort(plain)
	out = append(out, slices.Compact(plain)...)
	slices.Sort(out)
	return strings.Join(out, ",")
}

// NumberRanges renders sorted numbers as ranges, each zero-padded to
// width: "1-3,5".
func NumberRanges(nums []int, width int) string {
	var ranges []string
	for i := 0; i < len(nums); {
		j := i
		for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
			j++
		}
		r := fmt.Sprintf("%0*d", width, nums[i])
		if j > i {
			r += fmt.Sprintf("-%0*d", width, nums[j])
		}
		ranges = append(ranges, r)
		i = j + 1
	}
	return strings.Join(ranges, ",")
}

// ExpandHostList reads a Slurm host list, compressed or not
// ("gpu[01-03,7],login", "n[1-2]-ib"), into its names in the order
// written, as `scontrol show hostnames` prints them. Ranges keep the
// zero padding of their first number; brackets do not nest; at most
// MaxHostListNames names.
func ExpandHostList(list string) ([]string, error) {
	var out []string
	depth, from := 0, 0
	for i := 0; i <= len(list); i++ {
		if i < len(list) {
			switch list[i] {
			case '[':
				depth++
			case ']':
				depth--
			}
			if list[i] != ',' || depth != 0 {
				continue
			}
		}
		if i == from && i == len(list) && from == 0 {
			break // an empty list
		}
		names, err := expandHost(list[from:i])
		if err != nil {
			return nil, err
		}
		if len(out)+len(names) > MaxHostListNames {
			return nil, fmt.Errorf("host list: more than %d names", MaxHostListNames)
		}
		out = append(out, names...)
		from = i + 1
	}
	return out, nil
}

// expandHost expands one item of a host list: PREFIX[RANGES]SUFFIX or a
// plain name.
func expandHost(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if item == "" || strings.ContainsAny(item, "]") {
			return nil, fmt.Errorf("host list: bad name %q", item)
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item, ']')
	if end < open || strings.Count(item, "[") != 1 || strings.Count(item, "]") != 1 {
		return nil, fmt.Errorf("host list: %q: want PREFIX[RANGES]SUFFIX, like gpu[01-04]", item)
	}
	prefix, ranges, suffix := item[:open], item[open+1:end], item[end+1:]
	var out []string
	for r := range strings.SplitSeq(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err := errors.Join(err1, err2); err != nil || lo == "" || a < 0 || b < a {
			return nil, fmt.Errorf("host list: %q: bad range %q", item, r)
		}
		if b-a >= MaxHostListNames {
			return nil, fmt.Errorf("host list: more than %d names", MaxHostListNames)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%s%0*d%s", prefix, len(lo), n, suffix))
		}
	}
	return out, nil
}
