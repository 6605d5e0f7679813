package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/skein-dev/skein/api"
)

// Default size of a remote terminal when the local one has none (the
// input and output are not a terminal).
const (
	defaultRows = 24
	defaultCols = 80
)

// terminalSize is the size of the terminal f is, or false.
func terminalSize(f *os.File) (rows, cols uint16, ok bool) {
	if f == nil {
		return 0, 0, false
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Row == 0 || ws.Col == 0 {
		return 0, 0, false
	}
	return ws.Row, ws.Col, true
}

// isTerminal reports whether f is a terminal (its size may be unset).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// makeRaw puts the terminal f is into raw mode, as a remote shell needs
// it (every key goes through as typed, nothing is echoed here), and
// returns what restores it.
func makeRaw(f *os.File) (restore func(), err error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

// interact runs a terminal session with the local one: keys from in go
// to it, its screen to out. Where in is a terminal it is put in raw mode
// (restored at the end), and its resizes follow; elsewhere the session
// gets a terminal of the default size and in's bytes as they come. It
// returns the command's exit code.
func interact(ctx context.Context, s *api.PTYSession, in io.Reader, out io.Writer) (int, error) {
	defer s.Close()
	if inFile, ok := in.(*os.File); ok && isTerminal(inFile) {
		restore, err := makeRaw(inFile)
		if err != nil {
			return 0, err
		}
		defer restore()
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if rows, cols, ok := terminalSize(inFile); ok {
					_ = s.Resize(rows, cols)
				}
			}
		}()
	}
	// Told to end (kill, a hangup of the local terminal), skein passes
	// the signal on, then ends with the session, the terminal restored.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(stop)
	go func() {
		// Keys until the local input ends; the session ends by itself.
		_, _ = io.Copy(s, in)
	}()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, s)
		done <- err
	}()
	for {
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, err
			}
			return s.ExitCode(), nil
		case sig := <-stop:
			_ = s.Signal(int(sig.(syscall.Signal)))
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
