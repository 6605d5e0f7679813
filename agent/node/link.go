package node

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sysClassNet is where Linux shows network interfaces.
const sysClassNet = "/sys/class/net"

// linkMbps is the speed, in Mb/s, of the interface that holds ip, as the
// kernel reports it; 0 when it cannot tell (loopback, virtual NICs, links
// that are down). Rank 0 of a gang goes to the fastest node (sched/rank.go).
func linkMbps(ip string) int {
	want := net.ParseIP(ip)
	if want == nil {
		return 0
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return 0
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(want) {
				return readSpeed(filepath.Join(sysClassNet, ifc.Name, "speed"))
			}
		}
	}
	return 0
}

// readSpeed reads a /sys/class/net/IFACE/speed file: Mb/s, or -1 (or an
// error) when the speed is unknown.
func readSpeed(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || v < 0 {
		return 0
	}
	return v
}
