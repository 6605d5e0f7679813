// Package gpu finds the GPUs a node offers: real devices through NVML
// (github.com/NVIDIA/go-nvml), or simulated ones for dev mode and tests,
// which are marked as simulated wherever they travel.
//
// It is the only skein package that imports go-nvml. go-nvml needs cgo, so
// the NVML code carries a cgo build constraint; a binary built with
// CGO_ENABLED=0 still builds and reports that NVML support is missing.
package gpu
