package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// DefaultJobUser is the account jobs run as when their owner has no local
// account of the same name (--job-user).
const DefaultJobUser = "nobody"

// passwdFile is where an account's login shell is looked up; os/user does
// not return it.
const passwdFile = "/etc/passwd"

// defaultShell is the SHELL of an account whose login shell is not known.
const defaultShell = "/bin/sh"

// Account is the local account a job runs as: the process's uid, gid and
// supplementary groups, and the HOME, USER, LOGNAME and SHELL it is given.
// The runner resolves it once per allocation and records it in spec.json,
// so that the supervisor, and any runner that adopts the allocation later,
// never look it up again.
type Account struct {
	Name   string   `json:"name"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	Home   string   `json:"home"`
	Shell  string   `json:"shell,omitempty"`
}

// LookupJobUser resolves a --job-user value: a user name, or UID[:GID]
// (GID defaults to the account's primary group, and is required for a uid
// that has no account); "" means DefaultJobUser. An account that does not
// exist, or is uid 0, is refused: jobs never fall back to root.
func LookupJobUser(s string) (Account, error) {
	if s == "" {
		s = DefaultJobUser
	}
	var a Account
	uidText, gidText, hasGID := strings.Cut(s, ":")
	uid, numeric := parseID(uidText)
	switch {
	case !numeric && hasGID:
		return Account{}, fmt.Errorf("%w: want a user name or UID[:GID]", ErrJobUser)
	case !numeric:
		u, err := user.Lookup(s)
		if err != nil {
			return Account{}, fmt.Errorf("%w: %w", ErrJobUser, lookupError(err))
		}
		if a, err = accountOf(u); err != nil {
			return Account{}, fmt.Errorf("%w: %w", ErrJobUser, err)
		}
	default:
		u, err := user.LookupId(uidText)
		var unknown user.UnknownUserIdError
		switch {
		case err == nil:
			if a, err = accountOf(u); err != nil {
				return Account{}, fmt.Errorf("%w: %w", ErrJobUser, err)
			}
		case errors.As(err, &unknown) && hasGID:
			// A bare uid: nothing to take a name or a home from.
			a = Account{Name: uidText, UID: uid, Home: "/", Shell: defaultShell}
		case errors.As(err, &unknown):
			return Account{}, fmt.Errorf("%w: uid %d has no local account: give its group too, as UID:GID", ErrJobUser, uid)
		default:
			return Account{}, fmt.Errorf("%w: %w", ErrJobUser, err)
		}
		if hasGID {
			gid, ok := parseID(gidText)
			if !ok {
				return Account{}, fmt.Errorf("%w: group %q: want a number", ErrJobUser, gidText)
			}
			a.GID, a.Groups = gid, []uint32{gid}
		}
	}
	if a.UID == 0 {
		return Account{}, fmt.Errorf("%w: %s is uid 0, and jobs never run as root by default", ErrJobUser, a.Name)
	}
	return a, nil
}

// resolveAccount is the account a job of owner runs as: the local account
// of that name when there is one, else a uid of the owner's own from uids
// (owneruids.go), or the job user where uids is nil, and for a job
// without an owner. allowRoot is whether an admin allows the owner to run
// as root; without it a local account with uid 0 is refused.
func resolveAccount(owner string, allowRoot bool, jobUser Account, uids *ownerUIDs) (Account, error) {
	if owner == "" {
		return jobUser, nil
	}
	u, err := user.Lookup(owner)
	var unknown user.UnknownUserError
	switch {
	case errors.As(err, &unknown) && uids != nil:
		return uids.account(owner)
	case errors.As(err, &unknown):
		return jobUser, nil
	case err != nil:
		return Account{}, fmt.Errorf("look up the account of owner %q: %w", owner, err)
	}
	a, err := accountOf(u)
	if err != nil {
		return Account{}, fmt.Errorf("account of owner %q: %w", owner, err)
	}
	if a.UID == 0 && !allowRoot {
		return Account{}, fmt.Errorf("%w: owner %q maps to the local account %s (uid 0); an admin may allow it with `skein acl user set %s --allow-root`",
			ErrRootRefused, owner, a.Name, owner)
	}
	return a, nil
}

// currentAccount is the account this process runs as, for an agent that
// is not root and so runs every job as itself. It never fails: what cannot
// be looked up comes from the environment.
func currentAccount() Account {
	a := Account{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
		if acct, err := accountOf(u); err == nil {
			return acct
		}
	}
	a.Name = os.Getenv("USER")
	if a.Name == "" {
		a.Name = strconv.Itoa(os.Getuid())
	}
	a.Home, _ = os.UserHomeDir()
	if a.Home == "" {
		a.Home = "/"
	}
	a.Shell = defaultShell
	if groups, err := os.Getgroups(); err == nil {
		for _, g := range groups {
			a.Groups = append(a.Groups, uint32(g))
		}
	}
	return a
}

// accountOf turns a looked-up user into an Account with its groups and
// login shell. Groups that cannot be listed leave the primary group alone.
func accountOf(u *user.User) (Account, error) {
	uid, ok := parseID(u.Uid)
	if !ok {
		return Account{}, fmt.Errorf("account %s: uid %q is not a number", u.Username, u.Uid)
	}
	gid, ok := parseID(u.Gid)
	if !ok {
		return Account{}, fmt.Errorf("account %s: gid %q is not a number", u.Username, u.Gid)
	}
	a := Account{Name: u.Username, UID: uid, GID: gid, Home: u.HomeDir, Shell: loginShell(u.Username)}
	if a.Home == "" {
		a.Home = "/"
	}
	ids, err := u.GroupIds()
	if err != nil {
		ids = nil
	}
	a.Groups = []uint32{gid}
	for _, id := range ids {
		if g, ok := parseID(id); ok && !slices.Contains(a.Groups, g) {
			a.Groups = append(a.Groups, g)
		}
	}
	return a, nil
}

// loginShell is the shell /etc/passwd gives name, or defaultShell.
func loginShell(name string) string {
	f, err := os.Open(passwdFile)
	if err != nil {
		return defaultShell
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) == 7 && fields[0] == name {
			if fields[6] == "" {
				return defaultShell
			}
			return fields[6]
		}
	}
	return defaultShell
}

// lookupError says in a few words that a user name has no account.
func lookupError(err error) error {
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		return fmt.Errorf("no local account %q", string(unknown))
	}
	return err
}

func parseID(s string) (uint32, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

// closedTo returns the first directory on the way into dir (dir included)
// that a may not search, with its mode and owner, or "" when the mode bits
// let a through. It ignores ACLs, so it only explains a refusal the kernel
// made or warns of one; it never refuses anything itself.
func closedTo(dir string, a Account) (string, fs.FileMode, uint32) {
	if a.UID == 0 {
		return "", 0, 0
	}
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) {
		return "", 0, 0
	}
	var steps []string
	for p := dir; ; p = filepath.Dir(p) {
		steps = append(steps, p)
		if p == "/" {
			break
		}
	}
	for _, p := range slices.Backward(steps) {
		fi, err := os.Stat(p)
		if err != nil {
			return "", 0, 0
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return "", 0, 0
		}
		perm := fi.Mode().Perm()
		var bit fs.FileMode = 0o001
		switch {
		case st.Uid == a.UID:
			bit = 0o100
		case st.Gid == a.GID || slices.Contains(a.Groups, st.Gid):
			bit = 0o010
		}
		if perm&bit == 0 {
			return p, perm, st.Uid
		}
	}
	return "", 0, 0
}

// runsAs names the account the spec in dir runs its job as, for users:
// "alice (uid 1001)"; "" when the spec names none.
func runsAs(dir string) string {
	var sp spec
	if found, err := readJSON(filepath.Join(dir, specFile), &sp); !found || err != nil || sp.User == nil {
		return ""
	}
	return fmt.Sprintf("%s (uid %d)", sp.User.Name, sp.User.UID)
}
