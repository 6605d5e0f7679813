package structs

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
)

// ShortIDLen is how many leading characters of an ID are shown and accepted
// as a prefix by people.
const ShortIDLen = 8

// NewID returns a random 128-bit ID as 32 hex characters. Only the leader and
// clients call it, never Apply.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// ShortID returns the displayed prefix of an ID; a job array task keeps
// its index ("3f2a9c1b-7").
func ShortID(id string) string {
	if arr := ArrayOf(id); arr != "" {
		return ShortID(arr) + id[len(arr):]
	}
	if len(id) > ShortIDLen {
		return id[:ShortIDLen]
	}
	return id
}

// SlurmID is the job's ID as Slurm users write it: its number ("123"),
// an array task's as ARRAY_INDEX ("120_3"); a job without a number
// (created before numbers were given) shows its short ID.
func (j *Job) SlurmID() string {
	switch {
	case j.Number == 0:
		return ShortID(j.ID)
	case j.ArrayID != "" && j.ArrayNumber != 0:
		return strconv.FormatUint(j.ArrayNumber, 10) + "_" + strconv.Itoa(j.ArrayIndex)
	}
	return strconv.FormatUint(j.Number, 10)
}

// ParseJobNumber reads a numeric job ID as Slurm users write it: "123",
// or an array task's "120_3" (index >= 0). ok is false for anything
// else, a hex ID or prefix included, unless it is all decimal digits.
func ParseJobNumber(s string) (number uint64, index int, ok bool) {
	base, idx, task := strings.Cut(s, "_")
	n, err := strconv.ParseUint(base, 10, 64)
	if err != nil || n == 0 || base[0] == '+' {
		return 0, 0, false
	}
	if !task {
		return n, -1, true
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || idx[0] == '+' {
		return 0, 0, false
	}
	return n, i, true
}
