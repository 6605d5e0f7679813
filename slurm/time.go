package slurm

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/structs"
)

// maxTimeDays bounds a time limit: far beyond any job, short of what a
// time.Duration holds.
const maxTimeDays = 3650

const timeForms = "want MINUTES, MM:SS, HH:MM:SS, DAYS-HH, DAYS-HH:MM or DAYS-HH:MM:SS, or UNLIMITED"

// ParseTime reads a Slurm time limit in any of its forms: MINUTES,
// MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS, DAYS-HOURS:MINUTES
// or DAYS-HOURS:MINUTES:SECONDS. UNLIMITED, INFINITE and 0 mean no limit.
func ParseTime(s string) (structs.Duration, error) {
	switch strings.ToUpper(s) {
	case "UNLIMITED", "INFINITE":
		return 0, nil
	}
	days, clock, hasDays := strings.Cut(s, "-")
	if !hasDays {
		clock, days = s, "0"
	}
	parts := strings.Split(clock, ":")
	nums := make([]int64, 0, 4)
	for _, p := range append([]string{days}, parts...) {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 || n > maxTimeDays*24*60*60 {
			return 0, badValue("time %q: %s", s, timeForms)
		}
		nums = append(nums, n)
	}
	var d, h, m, sec int64
	switch c := nums[1:]; {
	case !hasDays && len(c) == 1:
		m = c[0]
	case !hasDays && len(c) == 2:
		m, sec = c[0], c[1]
	case len(c) == 3:
		h, m, sec = c[0], c[1], c[2]
	case hasDays && len(c) == 1:
		h = c[0]
	case hasDays && len(c) == 2:
		h, m = c[0], c[1]
	default:
		return 0, badValue("time %q: %s", s, timeForms)
	}
	d = nums[0]
	total := ((d*24+h)*60+m)*60 + sec
	if total > maxTimeDays*24*60*60 {
		return 0, badValue("time %q is more than the limit of %d days", s, maxTimeDays)
	}
	return structs.Duration(time.Duration(total) * time.Second), nil
}

// signalNumbers are the Linux numbers of structs.TimeSignals, which
// --signal may give instead of a name.
var signalNumbers = map[string]string{
	"1": "HUP", "2": "INT", "3": "QUIT", "10": "USR1", "12": "USR2",
	"14": "ALRM", "15": "TERM", "18": "CONT", "23": "URG", "28": "WINCH",
}

// maxSignalSeconds is the most seconds before the limit sbatch takes.
const maxSignalSeconds = 65535

// ParseSignal reads sbatch's --signal: [{R|B}:]SIG[@SECONDS], SIG a name
// (with or without SIG) or a number. R: and B: are accepted: skein sends
// the signal to the job's whole process group, the script and what it
// started. SECONDS defaults to 60.
func ParseSignal(s string) (*structs.TimeSignal, error) {
	v := s
	if who, rest, ok := strings.Cut(v, ":"); ok {
		if who != "R" && who != "B" && who != "RB" && who != "BR" {
			return nil, badValue("signal %q: want [R:|B:]SIG[@SECONDS], like B:USR1@90", s)
		}
		v = rest
	}
	name, at, hasAt := strings.Cut(v, "@")
	if n, ok := signalNumbers[name]; ok {
		name = n
	}
	if hasAt {
		secs, err := strconv.Atoi(at)
		if err != nil || secs < 1 || secs > maxSignalSeconds {
			return nil, badValue("signal %q: the time before the limit is a number of seconds 1..%d", s, maxSignalSeconds)
		}
		name += "@" + at
	}
	sig, err := structs.ParseTimeSignal(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadValue, err)
	}
	return sig, nil
}

// slurmRelative is now[+-N[unit]].
var slurmRelative = regexp.MustCompile(`^now(?:([+-])(\d{1,9})(seconds|minutes|hours|days|weeks)?)?$`)

// ParseDate reads a point in time as Slurm's commands take it (sacct -S
// and -E, sbatch --begin and --deadline), in local time:
// YYYY-MM-DD[THH:MM[:SS]] (or RFC 3339, with its zone), MM/DD[/YY], HH:MM[:SS] (today),
// now[+-N[seconds|minutes|hours|days|weeks]], today, midnight, noon,
// fika (15:00), teatime (16:00) or tomorrow.
func ParseDate(s string, now time.Time) (time.Time, error) {
	y, m, d := now.Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, time.Local)
	switch ls := strings.ToLower(s); ls {
	case "today", "midnight":
		return today, nil
	case "noon":
		return today.Add(12 * time.Hour), nil
	case "fika":
		return today.Add(15 * time.Hour), nil
	case "teatime":
		return today.Add(16 * time.Hour), nil
	case "tomorrow":
		return today.AddDate(0, 0, 1), nil
	default:
		if g := slurmRelative.FindStringSubmatch(ls); g != nil {
			if g[1] == "" {
				return now, nil
			}
			n, _ := strconv.Atoi(g[2])
			unit := map[string]time.Duration{"": time.Second, "seconds": time.Second, "minutes": time.Minute,
				"hours": time.Hour, "days": 24 * time.Hour, "weeks": 7 * 24 * time.Hour}[g[3]]
			if g[1] == "-" {
				n = -n
			}
			return now.Add(time.Duration(n) * unit), nil
		}
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02", "01/02/06", "01/02"} {
		t, err := time.ParseInLocation(layout, s, time.Local)
		if err != nil {
			continue
		}
		if layout == "01/02" {
			t = t.AddDate(y, 0, 0)
		}
		return t, nil
	}
	for _, layout := range []string{"15:04:05", "15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return today.Add(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second), nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: want YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], HH:MM[:SS], now[+-N[unit]], today, midnight, noon, teatime or tomorrow", s)
}
