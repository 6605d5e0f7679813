// Package nvmlmock readies go-nvml's mock servers (mock/dgxh100 and its
// kin) for skein's tests: the queries discovery and the telemetry make
// that the mocks leave unset answer, so that gpu.FromNVML and
// gpu.NVMLTelemetry run over a mock DGX as over a real one. Tests of gpu,
// and of the packages that show what gpu reads (agent/metrics), share it.
//
// It lives under gpu/ because go-nvml needs cgo: its files carry the same
// cgo build constraint as gpu's NVML code, and a build with CGO_ENABLED=0
// leaves this package empty.
package nvmlmock
