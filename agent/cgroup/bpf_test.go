package cgroup

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

// run interprets an encoded device filter on one access, as the kernel
// would: it knows the instructions deviceFilter emits and fails on any
// other, on a jump out of the program, and on a program that does not
// end in exit.
func run(t interface{ Fatalf(string, ...any) }, code []byte, devType, major, minor, access uint32) int64 {
	ctx := make([]byte, 12)
	binary.LittleEndian.PutUint32(ctx[0:], access<<16|devType)
	binary.LittleEndian.PutUint32(ctx[4:], major)
	binary.LittleEndian.PutUint32(ctx[8:], minor)
	var reg [11]uint64
	n := len(code) / 8
	for pc, steps := 0, 0; ; pc, steps = pc+1, steps+1 {
		if pc < 0 || pc >= n || steps > n {
			t.Fatalf("pc %d out of the program of %d instructions", pc, n)
		}
		b := code[8*pc : 8*pc+8]
		op, dst, src := b[0], b[1]&0x0f, b[1]>>4
		off := int16(binary.LittleEndian.Uint16(b[2:]))
		imm := int32(binary.LittleEndian.Uint32(b[4:]))
		switch op {
		case opLoadW:
			if src != regCtx || off < 0 || int(off)+4 > len(ctx) || off%4 != 0 {
				t.Fatalf("pc %d: load from r%d%+d", pc, src, off)
			}
			reg[dst] = uint64(binary.LittleEndian.Uint32(ctx[off:]))
		case opAndImm:
			reg[dst] &= uint64(int64(imm))
		case opMovImm:
			reg[dst] = uint64(int64(imm))
		case opJneImm:
			if reg[dst] != uint64(int64(imm)) {
				pc += int(off)
			}
		case opExit:
			return int64(reg[regResult])
		default:
			t.Fatalf("pc %d: unknown opcode %#x", pc, op)
		}
	}
}

// TestDeviceFilter_DeniesExactlyItsDevices: for any deny list and any
// access, the program refuses exactly the listed character devices, for
// every kind of access, and lets everything else through (block devices
// of the same numbers included).
func TestDeviceFilter_DeniesExactlyItsDevices(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		devs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Device {
			return Device{Major: rapid.Uint32Range(0, 300).Draw(t, "major"), Minor: rapid.Uint32Range(0, 300).Draw(t, "minor")}
		}), 0, 20).Draw(t, "deny")
		code := encode(deviceFilter(devs))
		deny := make(map[Device]bool)
		for _, d := range devs {
			deny[d] = true
		}
		// Every listed device, and random others.
		probes := append([]Device{}, devs...)
		probes = append(probes, rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Device {
			return Device{Major: rapid.Uint32Range(0, 300).Draw(t, "pmajor"), Minor: rapid.Uint32Range(0, 300).Draw(t, "pminor")}
		}), 1, 20).Draw(t, "probes")...)
		for _, p := range probes {
			for _, access := range []uint32{unix.BPF_DEVCG_ACC_READ, unix.BPF_DEVCG_ACC_WRITE, unix.BPF_DEVCG_ACC_MKNOD,
				unix.BPF_DEVCG_ACC_READ | unix.BPF_DEVCG_ACC_WRITE} {
				want := int64(1)
				if deny[p] {
					want = 0
				}
				if got := run(t, code, unix.BPF_DEVCG_DEV_CHAR, p.Major, p.Minor, access); got != want {
					t.Fatalf("char %s access %d: program returned %d, want %d", p, access, got, want)
				}
				if got := run(t, code, unix.BPF_DEVCG_DEV_BLOCK, p.Major, p.Minor, access); got != 1 {
					t.Fatalf("block %d:%d: program returned %d, want 1 (only char devices are denied)", p.Major, p.Minor, got)
				}
			}
		}
	})
}

// TestDeviceFilter_GPUCase is the case a node makes: a 1-GPU job of an
// 8-GPU node may open its GPU, nvidiactl and anything else, and none of
// the other seven GPUs.
func TestDeviceFilter_GPUCase(t *testing.T) {
	var deny []Device
	for minor := uint32(0); minor < 8; minor++ {
		if minor != 5 {
			deny = append(deny, Device{Major: NVIDIAMajor, Minor: minor})
		}
	}
	code := encode(deviceFilter(deny))
	for minor := uint32(0); minor < 8; minor++ {
		want := int64(0)
		if minor == 5 {
			want = 1
		}
		if got := run(t, code, unix.BPF_DEVCG_DEV_CHAR, NVIDIAMajor, minor, unix.BPF_DEVCG_ACC_READ|unix.BPF_DEVCG_ACC_WRITE); got != want {
			t.Errorf("/dev/nvidia%d: %d, want %d", minor, got, want)
		}
	}
	for _, d := range []Device{{NVIDIAMajor, 255}, {1, 3}, {231, 192}} {
		if got := run(t, code, unix.BPF_DEVCG_DEV_CHAR, d.Major, d.Minor, unix.BPF_DEVCG_ACC_READ); got != 1 {
			t.Errorf("%s (nvidiactl, /dev/null, an InfiniBand verbs node): %d, want 1", d, got)
		}
	}
	if got, want := len(code)/8, 4+5*7+2; got != want {
		t.Errorf("program of %d instructions, want %d", got, want)
	}
}
