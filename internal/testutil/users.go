package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// User is a local account a test made.
type User struct {
	Name     string
	UID, GID int
}

// lockRetry bounds how long useradd and userdel are retried while another
// process holds /etc/passwd's lock (tests of several packages run at once).
const lockRetry = 10 * time.Second

// LocalUser creates a local account with a name of its own (and a group
// of the same name), without a home directory, and removes it when the
// test ends. It skips the test when not run as root or without useradd:
// only root makes accounts, and only a root agent runs jobs as them.
func LocalUser(t testing.TB) User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test makes a local account and runs jobs as it")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skipf("needs useradd to make a local account: %v", err)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "skt" + hex.EncodeToString(b[:])
	userCmd(t, "useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh", name)
	t.Cleanup(func() { userCmd(t, "userdel", name) })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("look up the account just made: %v", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		t.Fatal(err)
	}
	return User{Name: name, UID: uid, GID: gid}
}

// userCmd runs useradd or userdel, again while the account files are
// locked by another process.
func userCmd(t testing.TB, name string, args ...string) {
	t.Helper()
	deadline := time.Now().Add(lockRetry)
	for {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err == nil {
			return
		}
		if !strings.Contains(string(out), "lock") || time.Now().After(deadline) {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// JobDir is t.TempDir for a directory that jobs running as another user
// must reach (an agent's data dir, a directory they read): see
// LetJobsReach.
func JobDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	LetJobsReach(t, dir)
	return dir
}

// LetJobsReach lets every user search the directories a test made on the
// way to dir (those under os.TempDir), as /var/lib or /home let them: a
// job running as another user can then reach dir, if dir's own mode lets
// it. t.TempDir makes the first of them 0700.
func LetJobsReach(t testing.TB, dir string) {
	t.Helper()
	tmp := filepath.Clean(os.TempDir())
	for p := filepath.Dir(filepath.Clean(dir)); strings.HasPrefix(p, tmp+string(filepath.Separator)); p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the agent makes it, searchable
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
			t.Fatalf("let jobs reach %s: %v", dir, err)
		}
	}
}

// SharedDir is a JobDir that every user may write to, like /tmp (1777):
// for files a test's jobs write and the test reads.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir := JobDir(t)
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return dir
}
