package node

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// HostMemoryMiB reads MemTotal from /proc/meminfo; 0 when unknown, which the
// scheduler treats as "memory not tracked".
func HostMemoryMiB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kib / 1024
		}
	}
	return 0
}
