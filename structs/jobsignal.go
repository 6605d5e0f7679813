package structs

import (
	"fmt"
	"strconv"
	"strings"
)

// JobSignals are the signals a job's owner may send its running
// processes (scancel --signal), by name without the SIG prefix, with
// their Linux numbers: every standard signal a user may send a process
// of theirs.
var JobSignals = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "TRAP": 5, "ABRT": 6, "BUS": 7,
	"FPE": 8, "KILL": 9, "USR1": 10, "SEGV": 11, "USR2": 12, "PIPE": 13,
	"ALRM": 14, "TERM": 15, "STKFLT": 16, "CHLD": 17, "CONT": 18, "STOP": 19,
	"TSTP": 20, "TTIN": 21, "TTOU": 22, "URG": 23, "XCPU": 24, "XFSZ": 25,
	"VTALRM": 26, "PROF": 27, "WINCH": 28, "IO": 29, "PWR": 30, "SYS": 31,
}

// ParseJobSignal reads a signal to send a job: a name of JobSignals,
// with or without the SIG prefix, in any case, or its number. It returns
// the name, upper case, without SIG.
func ParseJobSignal(s string) (string, error) {
	if n, err := strconv.Atoi(s); err == nil {
		for name, num := range JobSignals {
			if num == n {
				return name, nil
			}
		}
		return "", fieldErr("signal", "%d: want a signal number from 1 to 31", n)
	}
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	if _, ok := JobSignals[name]; !ok {
		return "", fieldErr("signal", "unknown signal %q: want a name like USR1, TERM or KILL, or its number", s)
	}
	return name, nil
}

// JobSignalNumber is the Linux number of a name ParseJobSignal returned.
func JobSignalNumber(name string) (int, error) {
	n, ok := JobSignals[name]
	if !ok {
		return 0, fmt.Errorf("unknown signal %q", name)
	}
	return n, nil
}
