//go:build !cgo

package gpu

import "fmt"

// errNoNVMLSupport says that this binary cannot reach NVML at all.
var errNoNVMLSupport = fmt.Errorf("%w: this binary was built without NVML support (CGO_ENABLED=0)", ErrNVMLUnavailable)

// discoverNVML reports that this binary cannot reach NVML at all.
func discoverNVML() (Inventory, error) {
	return Inventory{}, errNoNVMLSupport
}
