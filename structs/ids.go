package structs

import (
	"crypto/rand"
	"encoding/hex"
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
