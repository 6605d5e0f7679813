// Command privs says what the kernel lets it do, for the container
// driver's tests, which install it setuid root in a test image: it prints
// its credentials and capabilities (the lines of /proc/self/status that
// say so, with single spaces), then, for each file named, "read FILE:"
// and the file's first line or "denied", and last whether it could make
// itself root ("setuid: root" or "setuid: denied").
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
)

func main() {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Println("status:", err)
		os.Exit(1)
	}
	for _, line := range strings.Split(string(status), "\n") {
		for _, key := range []string{"Uid:", "Gid:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:", "NoNewPrivs:"} {
			if strings.HasPrefix(line, key) {
				fmt.Println(strings.Join(strings.Fields(line), " "))
			}
		}
	}
	for _, path := range os.Args[1:] {
		fmt.Printf("read %s: %s\n", path, firstLine(path))
	}
	if err := syscall.Setuid(0); err != nil {
		fmt.Println("setuid: denied")
	} else {
		fmt.Println("setuid: root")
	}
}

// firstLine is the file's first line, or "denied" when it cannot be read.
func firstLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "denied"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if !s.Scan() {
		if s.Err() != nil {
			return "denied"
		}
		return ""
	}
	return s.Text()
}
