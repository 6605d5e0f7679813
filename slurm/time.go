package slurm

import (
	"fmt"
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
