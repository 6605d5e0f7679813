package testutil

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Busybox is where the tests' container images take their shell and
// tools from (Debian's busybox-static).
const Busybox = "/bin/busybox"

// ImagePATH is the PATH the test images set.
const ImagePATH = "/usr/local/bin:/bin"

// busyboxDockerfile builds a FROM scratch image with busybox's applets in
// /bin, the accounts root and nobody, and a world-writable /tmp.
const busyboxDockerfile = `FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN mkdir -p -m 1777 /tmp && mkdir -p /etc && \
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >/etc/passwd && \
	printf 'root:x:0:\nnogroup:x:65534:\n' >/etc/group
ENV PATH=` + ImagePATH + `
WORKDIR /tmp
`

// images are the test images this test binary built, by tag.
var images struct {
	mu   sync.Mutex
	done map[string]error
}

// RequireEngine skips the test unless a Docker engine answers at its
// default socket, and returns nothing else: the tests then talk to it.
func RequireEngine(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/var/run/docker.sock"); err != nil {
		t.Skipf("no Docker engine: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.APIVersion}}").CombinedOutput()
	if err != nil {
		t.Skipf("no Docker engine answers: docker version: %v: %s", err, bytes.TrimSpace(out))
	}
}

// BusyboxImage returns the tag of an image FROM scratch with busybox
// (see busyboxDockerfile), as ImageWith with no programs.
func BusyboxImage(t testing.TB) string {
	t.Helper()
	return ImageWith(t)
}

// ImageWith returns the tag of the busybox image (busyboxDockerfile) with
// the given static programs copied into /usr/local/bin (not /bin, where
// a program named like an applet would overwrite busybox through the
// applet's link), building it at most once
// per test binary. The tag names the image's content, so the tests of
// every package share one image and a rebuild is a no-op. It skips the
// test where no engine answers or busybox-static is missing.
func ImageWith(t testing.TB, programs ...string) string {
	t.Helper()
	RequireEngine(t)
	bb, err := os.ReadFile(Busybox)
	if err != nil {
		t.Skipf("%s is needed for the test image (apt-get install busybox-static): %v", Busybox, err)
	}
	files := map[string][]byte{"busybox": bb}
	dockerfile := busyboxDockerfile
	sum := sha256.New()
	sum.Write(bb)
	for _, p := range programs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		files[name] = b
		dockerfile += "COPY " + name + " /usr/local/bin/" + name + "\n"
		sum.Write([]byte(name))
		sum.Write(b)
	}
	sum.Write([]byte(dockerfile))
	tag := "skein-test-busybox:" + hex.EncodeToString(sum.Sum(nil))[:12]

	images.mu.Lock()
	defer images.mu.Unlock()
	err, built := images.done[tag]
	if !built {
		err = buildImage(tag, dockerfile, files)
		if images.done == nil {
			images.done = make(map[string]error)
		}
		images.done[tag] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

func buildImage(tag, dockerfile string, files map[string][]byte) error {
	if exec.Command("docker", "image", "inspect", tag).Run() == nil {
		return nil
	}
	dir, err := os.MkdirTemp("", "skein-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("docker build %s: %v\n%s", tag, err, out)
	}
	return nil
}
