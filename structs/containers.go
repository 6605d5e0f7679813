package structs

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// MaxShmSizeMiB bounds a job's ShmSizeMiB: 1 TiB, more /dev/shm than a
// node has memory.
const MaxShmSizeMiB = 1 << 20

// ParseMount reads the --mount form SRC:DST, SRC:DST:ro or SRC:DST:rw (the
// default); Validate checks the paths. Neither path may hold a colon.
func ParseMount(s string) (Mount, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Mount{}, fmt.Errorf("invalid mount %q: want SRC:DST or SRC:DST:ro, like /data:/data:ro (paths may not hold a colon)", s)
	}
	m := Mount{Source: parts[0], Target: parts[1]}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			m.ReadOnly = true
		case "rw":
		default:
			return Mount{}, fmt.Errorf("invalid mount %q: mode %q: want ro or rw", s, parts[2])
		}
	}
	switch {
	case m.Source == "":
		return Mount{}, fmt.Errorf("invalid mount %q: empty source: want SRC:DST[:ro]", s)
	case m.Target == "":
		return Mount{}, fmt.Errorf("invalid mount %q: empty target: want SRC:DST[:ro]", s)
	}
	return m, nil
}

// UnmarshalYAML reads one of a job file's mounts in the --mount form.
func (m *Mount) UnmarshalYAML(n *yaml.Node) error {
	v, err := fromYAML(n, ParseMount)
	if err == nil {
		*m = v
	}
	return err
}

// String is the --mount form, e.g. "/data:/data:ro".
func (m Mount) String() string {
	s := m.Source + ":" + m.Target
	if m.ReadOnly {
		s += ":ro"
	}
	return s
}

// MountAllowed reports whether a mount source lies under one of the
// directories a node allows (ContainerEngine.AllowMounts), on a path
// component boundary: /data allows /data and /data/x, not /database.
// Both sides are clean absolute paths (Validate).
func MountAllowed(src string, allow []string) bool {
	for _, dir := range allow {
		if src == dir || dir == "/" || (strings.HasPrefix(src, dir) && src[len(dir)] == '/') {
			return true
		}
	}
	return false
}

// Holds reports whether the engine holds an image: ref itself, or ref with
// the tag "latest" when it names neither tag nor digest, as the engine
// lists it (busybox is busybox:latest).
func (e *ContainerEngine) Holds(ref string) bool {
	if e == nil || ref == "" {
		return false
	}
	if slices.Contains(e.Images, ref) {
		return true
	}
	return !imageHasTagOrDigest(ref) && slices.Contains(e.Images, ref+":latest")
}

// Answers reports whether the engine answered the node's probe: it is
// there, named, and reports no error.
func (e *ContainerEngine) Answers() bool {
	return e != nil && e.Error == "" && e.Engine != ""
}

// imageHasTagOrDigest reports whether an image reference names a tag or a
// digest: an "@", or a ":" after the last "/" (a colon before it is a
// registry's port).
func imageHasTagOrDigest(ref string) bool {
	return strings.Contains(ref, "@") || strings.Contains(ref[strings.LastIndexByte(ref, '/')+1:], ":")
}

// Validate checks what a node reports of its engine against the limits,
// so a peer cannot make the cluster store unbounded data. The error is a
// *FieldError naming the first wrong field.
func (e *ContainerEngine) Validate() error {
	switch {
	case len(e.Engine) > MaxEngineFieldLen:
		return fieldErr("containers.engine", "longer than %d bytes", MaxEngineFieldLen)
	case len(e.APIVersion) > MaxEngineFieldLen:
		return fieldErr("containers.api_version", "longer than %d bytes", MaxEngineFieldLen)
	case len(e.Error) > MaxEngineErrorLen:
		return fieldErr("containers.error", "longer than %d bytes", MaxEngineErrorLen)
	case len(e.Images) > MaxEngineImages:
		return fieldErr("containers.images", "%d images, more than the limit of %d", len(e.Images), MaxEngineImages)
	case len(e.AllowMounts) > MaxMounts:
		return fieldErr("containers.allow_mounts", "%d directories, more than the limit of %d", len(e.AllowMounts), MaxMounts)
	}
	if err := validateCaps("containers.allow_caps", e.AllowCaps); err != nil {
		return err
	}
	for _, ref := range e.Images {
		if ref == "" || len(ref) > MaxImageRefLen {
			return fieldErr("containers.images", "a reference of %d bytes: want 1 to %d", len(ref), MaxImageRefLen)
		}
	}
	for _, dir := range e.AllowMounts {
		if msg := checkMountPath(dir); msg != "" {
			return fieldErr("containers.allow_mounts", "%s", msg)
		}
	}
	return nil
}

// validateContainer checks the container fields of a spec: the image
// reference, the capabilities, and that the pull policy, mounts, shm size
// and capabilities come with one.
func (s *JobSpec) validateContainer() error {
	if s.Image == "" {
		switch {
		case s.ImagePull != "":
			return fieldErr("image_pull", "set, but the job has no image")
		case len(s.Mounts) > 0:
			return fieldErr("mounts", "set, but the job has no image: only a container mounts directories")
		case s.ShmSizeMiB != 0:
			return fieldErr("shm_size_mib", "set, but the job has no image: only a container has its own /dev/shm")
		case len(s.Caps) > 0:
			return fieldErr("caps", "set, but the job has no image: only a container is given capabilities")
		}
		return nil
	}
	if err := ValidateImageRef(s.Image); err != nil {
		return err
	}
	switch s.ImagePull {
	case "", PullIfNotPresent, PullAlways, PullNever:
	default:
		return fieldErr("image_pull", "%q: want %s, %s or %s", s.ImagePull, PullIfNotPresent, PullAlways, PullNever)
	}
	if s.ShmSizeMiB < 0 || s.ShmSizeMiB > MaxShmSizeMiB {
		return fieldErr("shm_size_mib", "%s is out of range 0..%s", FormatMiB(int64(s.ShmSizeMiB)), FormatMiB(MaxShmSizeMiB))
	}
	if err := validateCaps("caps", s.Caps); err != nil {
		return err
	}
	if len(s.Mounts) > MaxMounts {
		return fieldErr("mounts", "%d mounts, more than the limit of %d", len(s.Mounts), MaxMounts)
	}
	targets := make(map[string]bool, len(s.Mounts))
	for _, m := range s.Mounts {
		if msg := checkMountPath(m.Source); msg != "" {
			return fieldErr("mounts", "source %s", msg)
		}
		if msg := checkMountPath(m.Target); msg != "" {
			return fieldErr("mounts", "target %s", msg)
		}
		if m.Target == "/" {
			return fieldErr("mounts", "target / would hide the whole image: mount somewhere below it")
		}
		if targets[m.Target] {
			return fieldErr("mounts", "target %s given twice", m.Target)
		}
		targets[m.Target] = true
	}
	return nil
}

// checkMountPath says what is wrong with a path of a mount, or "": it must
// be absolute and clean (no "." or ".." component, no "//", no trailing
// "/"), at most MaxMountPathLen bytes, without a colon (the --mount
// separator) or control characters.
func checkMountPath(p string) string {
	if len(p) > MaxMountPathLen {
		return fmt.Sprintf("path of %d bytes, more than the limit of %d", len(p), MaxMountPathLen)
	}
	if strings.IndexFunc(p, func(r rune) bool { return r == ':' || unicode.IsControl(r) }) >= 0 {
		return fmt.Sprintf("%q: holds a colon or a control character", p)
	}
	if !path.IsAbs(p) {
		return fmt.Sprintf("%q: want an absolute path", p)
	}
	if path.Clean(p) != p {
		return fmt.Sprintf("%q: want a clean path (no \".\" or \"..\", no \"//\", no trailing \"/\"), like %s", p, path.Clean(p))
	}
	return ""
}

// Parts of an image reference (registry/repo/name:tag@sha256:hex).
var (
	// A repository path component: lower-case letters and digits, joined
	// by ".", "_", "__" or any run of "-".
	imagePathComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	// A registry host name component.
	imageHostComponent = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$`)
	imageTag           = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	imageDigest        = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

// ValidateImageRef checks that ref reads as a container image reference:
// at most MaxImageRefLen bytes without spaces or control characters,
// [HOST[:PORT]/]PATH[:TAG][@sha256:DIGEST], where PATH is one or more
// lower-case components separated by "/". The first of several components
// is a registry host when it has a "." or a ":", an upper-case letter, or
// is localhost, as Docker reads it. The error is a *FieldError for "image".
func ValidateImageRef(ref string) error {
	if len(ref) > MaxImageRefLen {
		return fieldErr("image", "reference of %d bytes, more than the limit of %d", len(ref), MaxImageRefLen)
	}
	if strings.IndexFunc(ref, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return fieldErr("image", "%q holds a space or control character", ref)
	}
	if msg := imageRefProblem(ref); msg != "" {
		return fieldErr("image", "%q is not an image reference: %s", ref, msg)
	}
	return nil
}

// imageRefProblem says what is wrong with an image reference, or "".
func imageRefProblem(ref string) string {
	name, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest && !imageDigest.MatchString(digest) {
		return "want the digest after @ as sha256: and 64 lower-case hex digits"
	}
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		if tag := name[i+1:]; !imageTag.MatchString(tag) {
			return fmt.Sprintf("tag %q: want up to 128 letters, digits, _ . or -, not starting with . or -", tag)
		}
		name = name[:i]
	}
	if name == "" {
		return "no repository name"
	}
	comps := strings.Split(name, "/")
	if first := comps[0]; len(comps) > 1 && (strings.ContainsAny(first, ".:") || first == "localhost" || first != strings.ToLower(first)) {
		if msg := registryProblem(first); msg != "" {
			return msg
		}
		comps = comps[1:]
	}
	for _, c := range comps {
		if !imagePathComponent.MatchString(c) {
			return fmt.Sprintf("repository component %q: want lower-case letters and digits, joined by . _ __ or -", c)
		}
	}
	return ""
}

// registryProblem says what is wrong with the HOST[:PORT] of an image
// reference, or "".
func registryProblem(reg string) string {
	host, port, hasPort := strings.Cut(reg, ":")
	if hasPort {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return fmt.Sprintf("registry port %q: want a number from 1 to 65535", port)
		}
	}
	for _, c := range strings.Split(host, ".") {
		if !imageHostComponent.MatchString(c) {
			return fmt.Sprintf("registry host %q: want names of letters, digits and -, joined by dots", host)
		}
	}
	return ""
}
