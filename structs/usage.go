package structs

import "time"

// DecayFactor is what usage recorded dt ago is worth now with the given
// half-life: 2^(-dt/halfLife), 1 for dt <= 0 or no half-life. Replicas
// must agree on it to the bit, so it uses only +, -, *, / on float64,
// each rounded by an explicit conversion (which keeps the compiler from
// fusing a multiply and an add on the machines that can), never math.Exp
// or math.Pow, whose assembly differs from one architecture to another.
func DecayFactor(dt, halfLife time.Duration) float64 {
	if dt <= 0 || halfLife <= 0 {
		return 1
	}
	halvings := int64(dt / halfLife)
	if halvings >= 1100 {
		return 0 // below the smallest float64
	}
	f := float64(1)
	for range halvings {
		f = float64(f / 2)
	}
	// The rest, r in [0, 1): 2^-r = e^(-r ln 2), by its series; x <= ln 2,
	// so 20 terms are far past float64's precision.
	r := float64(float64(dt%halfLife) / float64(halfLife))
	x := float64(r * 0.6931471805599453)
	term, sum := float64(1), float64(1)
	for i := 1; i <= 20; i++ {
		term = float64(float64(term*-x) / float64(i))
		sum = float64(sum + term)
	}
	return float64(f * sum)
}
