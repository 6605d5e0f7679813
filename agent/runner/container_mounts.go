package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/skein-dev/skein/structs"
)

// A container's mounts, from the runner's check to the engine's mount
// (see the package doc for what holds and when). The runner checks each
// source against the node's allowed directories and opens it as the
// supervisor will, so that a bad mount fails the start at once; the
// supervisor opens it again, without following a link anywhere, and
// hands the engine the very directory it opened, bound under a directory
// only root reaches, or, where it cannot, the source's path if no user
// can swap anything on it, or else refuses the mount.

// containerMount is one of a container's mounts as the runner checked
// it: its source lies under the allowed directory Dir, at Path below it.
type containerMount struct {
	// Source is the source as the job gave it (cleaned), for messages.
	Source string `json:"source"`
	// Dir is the allowed directory Source lies under, with its links
	// resolved when the runner checked the mount; Path is Source below
	// it, "" for Dir itself.
	Dir      string `json:"dir"`
	Path     string `json:"path,omitempty"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// String is the mount as the job gave it, in the --mount form.
func (m containerMount) String() string {
	return structs.Mount{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly}.String()
}

// checkMounts checks that every mount's source lies under a directory of
// allow, by path component, and that it can be opened without following
// a symbolic link below the root (openMount): a link anywhere on the way,
// even one that leads back inside, is refused, and so is a source that is
// neither a directory nor a plain file. It returns the mounts as the
// supervisor opens them again. The scheduler places jobs by the node's
// allowed directories already; this is the node's own check.
func checkMounts(mounts []structs.Mount, allow []string) ([]containerMount, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	clean := make([]string, len(allow))
	for i, d := range allow {
		clean[i] = filepath.Clean(d)
	}
	allowed := "none: this node allows no mounts"
	if len(allow) > 0 {
		allowed = strings.Join(allow, ", ")
	}
	out := make([]containerMount, 0, len(mounts))
	for _, m := range mounts {
		refuse := func(why string) error {
			return fmt.Errorf("%w: %s: %s (allowed: %s)", ErrMountRefused, m, why, allowed)
		}
		if !filepath.IsAbs(m.Source) {
			return nil, refuse("the source is not an absolute path")
		}
		src := filepath.Clean(m.Source)
		dir := ""
		for _, d := range clean {
			if structs.MountAllowed(src, []string{d}) && len(d) > len(dir) {
				dir = d
			}
		}
		if dir == "" {
			return nil, refuse(src + " is not under an allowed directory")
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return nil, refuse(fmt.Sprintf("allowed directory %s: %v", dir, pathErr(err)))
		}
		cm := containerMount{Source: src, Dir: real, Path: strings.TrimPrefix(strings.TrimPrefix(src, dir), "/"),
			Target: m.Target, ReadOnly: m.ReadOnly}
		fd, _, err := openMount(cm)
		if err != nil {
			return nil, refuse(err.Error())
		}
		_ = unix.Close(fd)
		out = append(out, cm)
	}
	return out, nil
}

// pathErr is err without the path and operation a *fs.PathError adds.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// What a mount's source, or a directory on the way to it, may not be.
var (
	errSymlink      = errors.New("is a symbolic link: a mount's source is never reached through one")
	errNotDirOrFile = errors.New("is neither a directory nor a plain file")
)

// sourceKind says what is wrong with a file (its stat) on the way to a
// mount's source, or with the source itself (last), nil when nothing.
func sourceKind(st *unix.Stat_t, last bool) error {
	switch typ := st.Mode & unix.S_IFMT; {
	case typ == unix.S_IFLNK:
		return errSymlink
	case !last && typ != unix.S_IFDIR:
		return unix.ENOTDIR
	case last && typ != unix.S_IFDIR && typ != unix.S_IFREG:
		return errNotDirOrFile
	}
	return nil
}

// openMount opens m's source as an O_PATH descriptor, walking from / one
// component of m.Dir and m.Path at a time, each looked up beneath the
// directory the step starts from without following a symbolic link
// (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or openat O_NOFOLLOW
// where the kernel has no openat2): a link anywhere is refused, and so is
// a source that is neither a directory nor a plain file. It says in
// swappable where someone other than root could put something else in
// the source's place, "" when nobody can: then the source's path leads to
// what was opened for as long as root changes nothing on it.
func openMount(m containerMount) (fd int, swappable string, err error) {
	if !filepath.IsAbs(m.Dir) || filepath.Clean(m.Dir) != m.Dir || filepath.IsAbs(m.Path) || filepath.Clean("/"+m.Path) != "/"+m.Path {
		// A spec of an agent from before mounts were checked this way
		// names no allowed directory: its source would be /.
		return -1, "", fmt.Errorf("the mount names no allowed directory and a clean path below it (%q, %q)", m.Dir, m.Path)
	}
	var names []string
	for _, p := range []string{m.Dir, m.Path} {
		for _, name := range strings.Split(p, "/") {
			if name != "" {
				names = append(names, name)
			}
		}
	}
	cur, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("open /: %w", err)
	}
	curPath := "/"
	var curStat unix.Stat_t
	if err := unix.Fstat(cur, &curStat); err != nil {
		_ = unix.Close(cur)
		return -1, "", fmt.Errorf("stat /: %w", err)
	}
	for i, name := range names {
		next := filepath.Join(curPath, name)
		fd, err := openBeneath(cur, name)
		var st unix.Stat_t
		if err == nil {
			if err = unix.Fstat(fd, &st); err == nil {
				err = sourceKind(&st, i == len(names)-1)
			}
			if err != nil {
				_ = unix.Close(fd)
			}
		}
		if err != nil {
			_ = unix.Close(cur)
			if errors.Is(err, unix.ELOOP) {
				err = errSymlink
			}
			if errors.Is(err, errSymlink) || errors.Is(err, errNotDirOrFile) {
				return -1, "", fmt.Errorf("%s %w", next, err)
			}
			return -1, "", fmt.Errorf("%s: %w", next, err)
		}
		if swappable == "" && userMayReplace(cur, &curStat, &st) {
			swappable = curPath + " lets a user replace " + next
		}
		_ = unix.Close(cur)
		cur, curPath, curStat = fd, next, st
	}
	return cur, swappable, nil
}

// openBeneath opens name, one component, in the directory dirfd as an
// O_PATH descriptor, never through a symbolic link: a link itself is
// refused by openat2 (ELOOP), or opened by openat O_NOFOLLOW where the
// kernel has no openat2, for the caller to see what it is.
func openBeneath(dirfd int, name string) (int, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	for range 8 {
		fd, err := unix.Openat2(dirfd, name, &how)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			continue // a rename elsewhere raced the lookup
		case errors.Is(err, unix.ENOSYS):
			return unix.Openat(dirfd, name, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		}
		return fd, err
	}
	return -1, unix.EAGAIN
}

// userMayReplace reports whether someone other than root may put
// something else in the place of an entry (its stat) of the directory
// dirfd (its stat dir): the directory is not root's; or its group or
// others may write it, unless it is sticky and the entry root's (then
// only root may rename or remove it); or it has an access control list,
// which may let others write it.
func userMayReplace(dirfd int, dir, entry *unix.Stat_t) bool {
	if dir.Uid != 0 {
		return true
	}
	if dir.Mode&0o022 != 0 && (dir.Mode&unix.S_ISVTX == 0 || entry.Uid != 0) {
		return true
	}
	_, err := unix.Getxattr("/proc/self/fd/"+strconv.Itoa(dirfd), "system.posix_acl_access", nil)
	return err == nil
}

// mountStageName names the directory in the allocation directory where
// supervisors bind their containers' checked mount sources, one directory
// per allocation: a name no allocation has (checkID), so that nothing
// that removes an allocation's directory ever reaches into a bind mount.
const mountStageName = ".mounts"

// mountStageDir is where the supervisor of allocation id binds its
// container's mount sources.
func mountStageDir(allocDir, id string) string {
	return filepath.Join(allocDir, mountStageName, id)
}

// mountStage is what a supervisor holds of its container's mounts until
// the container has started: the sources it opened, and the bind mounts
// of them it made in dir.
type mountStage struct {
	dir    string
	fds    []int
	points []string
	log    hclog.Logger
}

// stageMounts opens each mount's source again (openMount) and says what
// the engine is to mount in its place: a bind mount of the very source
// opened, in the stage's directory, when the engine is seen to see it
// there (engineRoot is the engine's root directory as /proc shows it,
// "" when it cannot be seen, and why says why); else, when nobody but
// root can swap anything on the source's path, that path; else the mount
// is refused. The caller releases the stage once the container has
// started, or could not be.
func stageMounts(mounts []containerMount, dir, engineRoot, why string, log hclog.Logger) ([]structs.Mount, *mountStage, error) {
	s := &mountStage{dir: dir, log: log}
	out := make([]structs.Mount, 0, len(mounts))
	for i, m := range mounts {
		fd, swappable, err := openMount(m)
		if err != nil {
			s.release()
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrMountRefused, m, err)
		}
		s.fds = append(s.fds, fd)
		src, err := s.bind(i, fd, engineRoot)
		if err == nil {
			out = append(out, structs.Mount{Source: src, Target: m.Target, ReadOnly: m.ReadOnly})
			continue
		}
		if engineRoot == "" {
			err = errors.New(why)
		}
		if swappable != "" {
			s.release()
			return nil, nil, fmt.Errorf("%w: %s: %s, and the engine cannot be handed the source that was checked: %v",
				ErrMountRefused, m, swappable, err)
		}
		log.Info("the engine mounts the source by its path, which only root can change", "mount", m.String(), "why", err)
		out = append(out, structs.Mount{Source: filepath.Join(m.Dir, m.Path), Target: m.Target, ReadOnly: m.ReadOnly})
	}
	return out, s, nil
}

// bind binds the source open as fd at the stage's point i and returns the
// point, once the engine's root (engineRoot) is seen to lead to the same
// file there.
func (s *mountStage) bind(i, fd int, engineRoot string) (string, error) {
	if engineRoot == "" {
		return "", errors.New("the engine cannot be seen")
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(s.dir)
	if err != nil {
		return "", err
	}
	var src unix.Stat_t
	if err := unix.Fstat(fd, &src); err != nil {
		return "", err
	}
	point := filepath.Join(dir, strconv.Itoa(i))
	if src.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.Mkdir(point, 0o700)
	} else {
		var f *os.File
		if f, err = os.OpenFile(point, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		return "", err
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), point, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		_ = os.Remove(point)
		return "", fmt.Errorf("bind mount at %s: %w", point, err)
	}
	s.points = append(s.points, point)
	var seen unix.Stat_t
	if err := unix.Stat(engineRoot+point, &seen); err != nil || seen.Dev != src.Dev || seen.Ino != src.Ino {
		return "", fmt.Errorf("the engine does not see the bind mount at %s (it lives in another mount namespace): %v", point, err)
	}
	return point, nil
}

// release undoes the bind mounts (the container keeps its own) and closes
// the sources.
func (s *mountStage) release() {
	if s == nil {
		return
	}
	for _, p := range s.points {
		if err := unmountPoint(p); err != nil {
			s.log.Warn("cannot undo a mount source's bind mount; the runner retries when the allocation is over", "point", p, "error", err)
		}
	}
	s.points = nil
	if err := os.Remove(s.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("cannot remove the mount sources' directory", "dir", s.dir, "error", err)
	}
	for _, fd := range s.fds {
		_ = unix.Close(fd)
	}
	s.fds = nil
}

// unmountPoint detaches whatever is mounted at p and removes p, which is
// only ever removed empty: a point still mounted on is left (EBUSY).
func unmountPoint(p string) error {
	for range 8 {
		err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break // nothing (more) is mounted there
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// clearMountStage undoes what a supervisor that died left in dir, its
// mount stage: each bind mount, then the directory. Nothing there is
// removed but empty points and the directory itself.
func clearMountStage(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if err := unmountPoint(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
