package structs

import (
	"fmt"
	"slices"
	"strings"
)

// Capabilities are the Linux capabilities a job's container may be given
// (JobSpec.Caps) where its node allows them (ContainerEngine.AllowCaps),
// as the container engine spells them: the kernel's names without CAP_.
// A container has none of them unless both say so.
var Capabilities = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
	"LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// ParseCap reads a capability's name as a person writes it, with or
// without CAP_, in either case ("net_raw", "CAP_NET_RAW"), and returns it
// as Capabilities spells it.
func ParseCap(s string) (string, error) {
	name := strings.ToUpper(s)
	name = strings.TrimPrefix(name, "CAP_")
	if !slices.Contains(Capabilities, name) {
		return "", fmt.Errorf("%q is not a Linux capability: want a name like NET_BIND_SERVICE or CAP_NET_RAW", s)
	}
	return name, nil
}

// normalizeCaps spells each capability ParseCap's way, and leaves a name
// it does not know as it is, for validateCaps to refuse.
func normalizeCaps(caps []string) {
	for i, c := range caps {
		if name, err := ParseCap(c); err == nil {
			caps[i] = name
		}
	}
}

// validateCaps checks a list of capabilities as Normalize leaves it: at
// most one of each, each spelled as Capabilities spells it. The error is
// a *FieldError naming field.
func validateCaps(field string, caps []string) error {
	if len(caps) > len(Capabilities) {
		return fieldErr(field, "%d capabilities, more than the %d Linux has", len(caps), len(Capabilities))
	}
	for i, c := range caps {
		name, err := ParseCap(c)
		switch {
		case err != nil:
			return fieldErr(field, "%v", err)
		case name != c:
			return fieldErr(field, "%q: want it spelled %s", c, name)
		case slices.Contains(caps[:i], c):
			return fieldErr(field, "%s given twice", c)
		}
	}
	return nil
}

// CapsAllowed reports whether every capability of caps is in allow.
func CapsAllowed(caps, allow []string) bool {
	for _, c := range caps {
		if !slices.Contains(allow, c) {
			return false
		}
	}
	return true
}
