package cgroup

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The device filter of a v2 group: an eBPF program of type
// BPF_PROG_TYPE_CGROUP_DEVICE, which the kernel runs on every open, read,
// write and mknod of a device node by a process of the group, handing it
// struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; },
// where access_type is (access << 16) | type. It returns 0 to refuse the
// access (EPERM) and 1 to let it through.
//
// The program here denies a list of character devices, whatever the
// access, and allows everything else:
//
//	r2 = ctx->access_type & 0xffff      type
//	r3 = ctx->major
//	r4 = ctx->minor
//	for each denied device:
//	    if r2 != char  goto next
//	    if r3 != major goto next
//	    if r4 != minor goto next
//	    r0 = 0; exit
//	next:
//	r0 = 1; exit

// insn is one eBPF instruction.
type insn struct {
	op       uint8
	dst, src uint8
	off      int16
	imm      int32
}

// The opcodes the device filter uses.
const (
	opLoadW   = unix.BPF_LDX | unix.BPF_MEM | unix.BPF_W   // dst = *(u32 *)(src + off)
	opAndImm  = unix.BPF_ALU64 | unix.BPF_AND | unix.BPF_K // dst &= imm
	opMovImm  = unix.BPF_ALU64 | unix.BPF_MOV | unix.BPF_K // dst = imm
	opJneImm  = unix.BPF_JMP | unix.BPF_JNE | unix.BPF_K   // if dst != imm: pc += off
	opExit    = unix.BPF_JMP | unix.BPF_EXIT               // return r0
	devChar   = unix.BPF_DEVCG_DEV_CHAR
	regCtx    = 1
	regType   = 2
	regMajor  = 3
	regMinor  = 4
	regResult = 0
)

// deviceFilter is the program that denies devs and allows the rest.
func deviceFilter(devs []Device) []insn {
	prog := []insn{
		{op: opLoadW, dst: regType, src: regCtx, off: 0},
		{op: opAndImm, dst: regType, imm: 0xffff},
		{op: opLoadW, dst: regMajor, src: regCtx, off: 4},
		{op: opLoadW, dst: regMinor, src: regCtx, off: 8},
	}
	for _, d := range devs {
		// Each test skips the rest of its block: the two instructions
		// that deny, and the tests after it.
		prog = append(prog,
			insn{op: opJneImm, dst: regType, off: 4, imm: devChar},
			insn{op: opJneImm, dst: regMajor, off: 3, imm: int32(d.Major)},
			insn{op: opJneImm, dst: regMinor, off: 2, imm: int32(d.Minor)},
			insn{op: opMovImm, dst: regResult, imm: 0},
			insn{op: opExit},
		)
	}
	return append(prog,
		insn{op: opMovImm, dst: regResult, imm: 1},
		insn{op: opExit},
	)
}

// encode lays the program out as the kernel takes it: 8 bytes an
// instruction, the registers in one byte (source high, destination low on
// a little-endian machine).
func encode(prog []insn) []byte {
	out := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		var b [8]byte
		b[0] = in.op
		b[1] = in.src<<4 | in.dst&0x0f
		binary.LittleEndian.PutUint16(b[2:], uint16(in.off))
		binary.LittleEndian.PutUint32(b[4:], uint32(in.imm))
		out = append(out, b[:]...)
	}
	return out
}

// progLoadAttr is the head of union bpf_attr for BPF_PROG_LOAD, as far
// as this program needs it.
type progLoadAttr struct {
	progType    uint32
	insnCnt     uint32
	insns       uint64
	license     uint64
	logLevel    uint32
	logSize     uint32
	logBuf      uint64
	kernVersion uint32
	progFlags   uint32
}

// progAttachAttr is the head of union bpf_attr for BPF_PROG_ATTACH.
type progAttachAttr struct {
	targetFD    uint32
	attachBPFFD uint32
	attachType  uint32
	attachFlags uint32
}

// attachDeviceFilter loads the filter denying devs and attaches it to the
// group at dir, beside whatever programs are attached to it or above it
// (every one of them must allow an access). The attachment lasts as long
// as the group; the program needs no descriptor kept open.
func attachDeviceFilter(dir string, devs []Device) error {
	code := encode(deviceFilter(devs))
	license := []byte("Apache-2.0\x00")
	logBuf := make([]byte, 4096)
	load := progLoadAttr{
		progType: unix.BPF_PROG_TYPE_CGROUP_DEVICE,
		insnCnt:  uint32(len(code) / 8),
		insns:    uint64(uintptr(unsafe.Pointer(&code[0]))),
		license:  uint64(uintptr(unsafe.Pointer(&license[0]))),
		logLevel: 1,
		logSize:  uint32(len(logBuf)),
		logBuf:   uint64(uintptr(unsafe.Pointer(&logBuf[0]))),
	}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&load)), unsafe.Sizeof(load))
	runtime.KeepAlive(code)
	runtime.KeepAlive(license)
	if errno != 0 {
		return fmt.Errorf("load the program: %w (verifier: %s)", errno, cString(logBuf))
	}
	prog := int(fd)
	defer unix.Close(prog)
	group, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(group)
	attach := progAttachAttr{
		targetFD:    uint32(group),
		attachBPFFD: uint32(prog),
		attachType:  unix.BPF_CGROUP_DEVICE,
		attachFlags: unix.BPF_F_ALLOW_MULTI,
	}
	if _, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_ATTACH, uintptr(unsafe.Pointer(&attach)), unsafe.Sizeof(attach)); errno != 0 {
		return fmt.Errorf("attach the program to %s: %w", dir, errno)
	}
	return nil
}

// cString is the text of a NUL-terminated buffer.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
