package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// slurmLinks are the Slurm command names `make install SLURM_LINKS=1` adds.
var slurmLinks = []string{"squeue", "scancel", "sinfo", "sacct", "sbatch", "scontrol", "salloc", "srun"}

// makeCmd is `make -C ROOT args...` in the repository root; it skips the
// test where there is no make.
func makeCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make to run make install with")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(makeBin, append([]string{"-C", root}, args...)...)
}

// makeInstall runs `make install` with the package's binary as BIN, under
// a fresh DESTDIR, and returns DESTDIR.
func makeInstall(t *testing.T, vars ...string) string {
	t.Helper()
	dest := t.TempDir()
	cmd := makeCmd(t, append([]string{"install", "BIN=" + skeinBin, "DESTDIR=" + dest, "PREFIX=/usr"}, vars...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install %s: %v\n%s", strings.Join(vars, " "), err, out)
	}
	return dest
}

// installed lists the names in DESTDIR's /usr/bin.
func installed(t *testing.T, dest string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dest, "usr", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestMakeInstall_InstallsSkeinAlone(t *testing.T) {
	t.Parallel()
	dest := makeInstall(t)
	if got := installed(t, dest); !slices.Equal(got, []string{"skein"}) {
		t.Fatalf("PREFIX/bin holds %v, want skein alone", got)
	}
	bin := filepath.Join(dest, "usr", "bin", "skein")
	if fi, err := os.Lstat(bin); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed skein: %v (%v), want a regular file with mode 0755", fi.Mode(), err)
	}
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "skein ") {
		t.Fatalf("installed skein version: %v %q", err, out)
	}
}

func TestMakeInstall_WithSlurmLinksAddsTheSlurmNamesAsLinksToSkein(t *testing.T) {
	t.Parallel()
	dest := makeInstall(t, "SLURM_LINKS=1")
	want := append([]string{"skein"}, slurmLinks...)
	slices.Sort(want)
	if got := installed(t, dest); !slices.Equal(got, want) {
		t.Fatalf("PREFIX/bin holds %v, want %v", got, want)
	}
	for _, name := range slurmLinks {
		link := filepath.Join(dest, "usr", "bin", name)
		if target, err := os.Readlink(link); err != nil || target != "skein" {
			t.Errorf("%s links to %q (%v), want skein beside it", name, target, err)
			continue
		}
		// Called by the link's name, skein runs that command.
		out, err := exec.Command(link, "--help").CombinedOutput()
		if want := "skein " + name + " - "; err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s --help: %v, want the help of skein %s:\n%s", name, err, name, out)
		}
	}
}

func TestMakeInstall_WithoutABuiltBinarySaysToBuildFirst(t *testing.T) {
	t.Parallel()
	dest := t.TempDir()
	missing := filepath.Join(t.TempDir(), "skein")
	out, err := makeCmd(t, "install", "BIN="+missing, "DESTDIR="+dest).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "make install: no "+missing+": run make build (or make build-static) first") {
		t.Fatalf("make install without the binary: %v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(dest); len(entries) != 0 {
		t.Fatalf("make install without the binary installed %v", entries)
	}
}
