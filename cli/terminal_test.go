package cli

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// openTestPTY opens a pseudo-terminal's two ends; its size is unset.
func openTestPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// A terminal whose size is unset (as under script(1) fed by a pipe) is
// still a terminal: it is put in raw mode and restored after.
func TestTerminal_RawModeOnATerminalWithoutASizeAndRestored(t *testing.T) {
	_, tty := openTestPTY(t)
	if _, _, ok := terminalSize(tty); ok {
		t.Fatal("a new pseudo-terminal has a size")
	}
	if !isTerminal(tty) {
		t.Fatal("a pseudo-terminal without a size is not taken for a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(r) {
		t.Fatal("a pipe is taken for a terminal")
	}
	lflag := func() uint32 {
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		return tio.Lflag
	}
	before := lflag()
	restore, err := makeRaw(tty)
	if err != nil {
		t.Fatal(err)
	}
	if lflag()&(unix.ICANON|unix.ECHO|unix.ISIG) != 0 {
		t.Errorf("raw mode keeps line editing, echo or signals: lflag %#x", lflag())
	}
	restore()
	if lflag() != before {
		t.Errorf("restored lflag %#x, want %#x", lflag(), before)
	}
}
