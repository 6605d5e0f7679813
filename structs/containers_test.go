package structs

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestParseMount(t *testing.T) {
	cases := []struct {
		name, in string
		want     Mount
		err      string
	}{
		{"read-write by default", "/data:/data", Mount{Source: "/data", Target: "/data"}, ""},
		{"read-only", "/data:/mnt/data:ro", Mount{Source: "/data", Target: "/mnt/data", ReadOnly: true}, ""},
		{"read-write said", "/scratch:/scratch:rw", Mount{Source: "/scratch", Target: "/scratch"}, ""},
		{"paths are left to Validate", "data:x", Mount{Source: "data", Target: "x"}, ""},
		{"one path", "/data", Mount{}, `invalid mount "/data": want SRC:DST or SRC:DST:ro, like /data:/data:ro`},
		{"a colon too many", "/a:/b:ro:x", Mount{}, `invalid mount "/a:/b:ro:x": want SRC:DST`},
		{"odd mode", "/a:/b:rx", Mount{}, `invalid mount "/a:/b:rx": mode "rx": want ro or rw`},
		{"upper case mode", "/a:/b:RO", Mount{}, `mode "RO"`},
		{"no source", ":/b", Mount{}, `invalid mount ":/b": empty source`},
		{"no target", "/a::ro", Mount{}, `invalid mount "/a::ro": empty target`},
		{"empty", "", Mount{}, `invalid mount ""`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseMount(c.in)
			checkParse(t, c.in, got, err, c.want, c.err)
		})
	}
}

func TestMount_StringIsTheFlagForm(t *testing.T) {
	for _, s := range []string{"/data:/data", "/data:/mnt:ro"} {
		m, err := ParseMount(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseMount(%q).String() = %q, %v; want it back", s, m.String(), err)
		}
	}
}

func TestMount_JobFileTextAndJSONObject(t *testing.T) {
	var spec JobSpec
	doc := "image: x\nmounts: [\"/data:/data:ro\", /scratch:/tmp/s]\nshm_size: 64G\nimage_pull: always\n"
	if err := yaml.Unmarshal([]byte(doc), &spec); err != nil {
		t.Fatal(err)
	}
	want := JobSpec{Image: "x", ImagePull: PullAlways, ShmSizeMiB: 64 << 10,
		Mounts: []Mount{{Source: "/data", Target: "/data", ReadOnly: true}, {Source: "/scratch", Target: "/tmp/s"}}}
	if !reflect.DeepEqual(spec, want) {
		t.Fatalf("decoded %+v\nwant %+v", spec, want)
	}
	for doc, err := range map[string]string{
		"mounts: [/data]":                    `invalid mount "/data"`,
		"mounts: [{source: /a, target: /b}]": errNotText.Error(),
	} {
		if e := yaml.Unmarshal([]byte(doc), &spec); e == nil || !strings.Contains(e.Error(), err) {
			t.Errorf("decode %q: error %v, want one containing %q", doc, e, err)
		}
	}
	// The API keeps the object form.
	b, err := json.Marshal(want.Mounts[0])
	if err != nil || string(b) != `{"source":"/data","target":"/data","read_only":true}` {
		t.Fatalf("JSON of a mount = %s, %v", b, err)
	}
	var m Mount
	if err := json.Unmarshal(b, &m); err != nil || m != want.Mounts[0] {
		t.Fatalf("JSON round trip = %+v, %v", m, err)
	}
}

func TestValidateImageRef(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	good := []string{
		"busybox",
		"busybox:latest",
		"library/busybox:1.36",
		"nvcr.io/nvidia/pytorch:24.01-py3",
		"localhost/train",
		"localhost:5000/team/train:v2",
		"registry.example.com:443/a/b/c",
		"ghcr.io/org/my_image__x-y.z:TAG_1.0-rc",
		"busybox@" + digest,
		"ghcr.io/org/img:v1@" + digest,
		"MyRegistry/img", // an upper-case first component is a host
		"a--b",
		strings.Repeat("a", MaxImageRefLen),
	}
	for _, ref := range good {
		if err := ValidateImageRef(ref); err != nil {
			t.Errorf("ValidateImageRef(%q) = %v, want nil", ref, err)
		}
	}
	bad := []struct{ ref, err string }{
		{strings.Repeat("a", MaxImageRefLen+1), "reference of 256 bytes, more than the limit of 255"},
		{"busy box", "holds a space or control character"},
		{"busybox\n", "holds a space or control character"},
		{"busybox\x00", "holds a space or control character"},
		{"Busybox", `repository component "Busybox": want lower-case`},
		{"team/Train", `repository component "Train"`},
		{"a//b", `repository component ""`},
		{"a/", `repository component ""`},
		{"/a", `repository component ""`},
		{"-a", `repository component "-a"`},
		{"a.", `repository component "a."`},
		{"a___b", `repository component "a___b"`},
		{"busybox:", `tag "": want up to 128`},
		{"busybox:.x", `tag ".x"`},
		{"busybox:" + strings.Repeat("t", 129), "tag"},
		{"busybox:a:b", `repository component "busybox:a"`},
		{":latest", "no repository name"},
		{"busybox@sha256:abc", "want the digest after @ as sha256: and 64 lower-case hex digits"},
		{"busybox@md5:" + strings.Repeat("a", 32), "digest"},
		{"busybox@" + strings.ToUpper(digest), "digest"},
		{"localhost:0/a", `registry port "0"`},
		{"localhost:65536/a", `registry port "65536"`},
		{"localhost:http/a", `registry port "http"`},
		{"exa_mple.com/a", `registry host "exa_mple.com"`},
		{"-x.com/a", `registry host "-x.com"`},
		{"x..com/a", `registry host "x..com"`},
		{"", "no repository name"},
	}
	for _, c := range bad {
		err := ValidateImageRef(c.ref)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "image" || !strings.Contains(err.Error(), c.err) {
			t.Errorf("ValidateImageRef(%q) = %v, want an image error containing %q", c.ref, err, c.err)
		}
	}
}

func TestJobSpec_ValidateContainerFields(t *testing.T) {
	image := func(s *JobSpec) { s.Image = "nvcr.io/nvidia/pytorch:24.01-py3" }
	mounts := func(n int) []Mount {
		out := make([]Mount, n)
		for i := range out {
			out[i] = Mount{Source: "/data", Target: "/m/" + strings.Repeat("x", i+1)}
		}
		return out
	}
	long := "/" + strings.Repeat("p", MaxMountPathLen)
	cases := []struct {
		name   string
		mutate func(*JobSpec)
		field  string // "" = valid
		msg    string
	}{
		{"image with everything", func(s *JobSpec) {
			image(s)
			s.ImagePull, s.ShmSizeMiB, s.Mounts = PullNever, MaxShmSizeMiB, mounts(MaxMounts)
		}, "", ""},
		{"each pull policy", func(s *JobSpec) { image(s); s.ImagePull = PullIfNotPresent }, "", ""},
		{"mount of the root", func(s *JobSpec) { image(s); s.Mounts = []Mount{{Source: "/", Target: "/host"}} }, "", ""},
		{"bad image", func(s *JobSpec) { s.Image = "Not An Image" }, "image", "space"},
		{"odd pull policy", func(s *JobSpec) { image(s); s.ImagePull = "sometimes" },
			"image_pull", `"sometimes": want if-not-present, always or never`},
		{"pull policy without image", func(s *JobSpec) { s.ImagePull = PullAlways }, "image_pull", "no image"},
		{"mounts without image", func(s *JobSpec) { s.Mounts = mounts(1) }, "mounts", "no image"},
		{"shm size without image", func(s *JobSpec) { s.ShmSizeMiB = 64 }, "shm_size_mib", "no image"},
		{"negative shm size", func(s *JobSpec) { image(s); s.ShmSizeMiB = -1 }, "shm_size_mib", "out of range 0..1T"},
		{"huge shm size", func(s *JobSpec) { image(s); s.ShmSizeMiB = MaxShmSizeMiB + 1 }, "shm_size_mib", "out of range 0..1T"},
		{"too many mounts", func(s *JobSpec) { image(s); s.Mounts = mounts(MaxMounts + 1) },
			"mounts", "33 mounts, more than the limit of 32"},
		{"relative source", func(s *JobSpec) { image(s); s.Mounts = []Mount{{Source: "data", Target: "/d"}} },
			"mounts", `source "data": want an absolute path`},
		{"relative target", func(s *JobSpec) { image(s); s.Mounts = []Mount{{Source: "/data", Target: "d"}} },
			"mounts", `target "d": want an absolute path`},
		{"dot-dot in source", func(s *JobSpec) { image(s); s.Mounts = []Mount{{Source: "/data/../etc", Target: "/d"}} },
			"mounts", `source "/data/../etc": want a clean path`},
		{"trailing slash", func(s *JobSpec) { image(s); s.Mounts = []Mount{{Source: "/data/", Target: "/d"}} },
			"mounts", "like /data"},
		{"double slash", func(s *JobSpec) { image(s); s.Mounts = []Mount{{Source: "/a", Target: "//d"}} }, "mounts", "clean"},
		{"colon in a path", func(s *JobSpec) { image(s); s.Mounts = []Mount{{Source: "/a:b", Target: "/d"}} },
			"mounts", "holds a colon or a control character"},
		{"control character", func(s *JobSpec) { image(s); s.Mounts = []Mount{{Source: "/a", Target: "/d\n"}} },
			"mounts", "control character"},
		{"long path", func(s *JobSpec) { image(s); s.Mounts = []Mount{{Source: long, Target: "/d"}} },
			"mounts", "path of 1025 bytes, more than the limit of 1024"},
		{"target is the root", func(s *JobSpec) { image(s); s.Mounts = []Mount{{Source: "/data", Target: "/"}} },
			"mounts", "target / would hide the whole image"},
		{"capabilities", func(s *JobSpec) { image(s); s.Caps = []string{"NET_BIND_SERVICE", "SYS_PTRACE"} }, "", ""},
		{"every capability", func(s *JobSpec) { image(s); s.Caps = slices.Clone(Capabilities) }, "", ""},
		{"capabilities without image", func(s *JobSpec) { s.Caps = []string{"NET_RAW"} }, "caps", "no image"},
		{"an unknown capability", func(s *JobSpec) { image(s); s.Caps = []string{"NET_RAW", "ALL"} },
			"caps", `"ALL" is not a Linux capability: want a name like NET_BIND_SERVICE or CAP_NET_RAW`},
		{"a capability spelled otherwise", func(s *JobSpec) { image(s); s.Caps = []string{"cap_net_raw"} },
			"caps", `"cap_net_raw": want it spelled NET_RAW`},
		{"a capability twice", func(s *JobSpec) { image(s); s.Caps = []string{"NET_RAW", "CHOWN", "NET_RAW"} },
			"caps", "NET_RAW given twice"},
		{"more capabilities than Linux has", func(s *JobSpec) { image(s); s.Caps = append(slices.Clone(Capabilities), "CHOWN") },
			"caps", "42 capabilities, more than the 41 Linux has"},
		{"same target twice", func(s *JobSpec) {
			image(s)
			s.Mounts = []Mount{{Source: "/a", Target: "/d"}, {Source: "/b", Target: "/d", ReadOnly: true}}
		}, "mounts", "target /d given twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validSpec()
			c.mutate(&s)
			err := s.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Msg, c.msg) {
				t.Fatalf("Validate() = %v, want a %s error containing %q", err, c.field, c.msg)
			}
		})
	}
}

func TestContainerEngine_Validate(t *testing.T) {
	images := make([]string, MaxEngineImages+1)
	for i := range images {
		images[i] = "img:" + strings.Repeat("v", i+1)
	}
	dirs := make([]string, MaxMounts+1)
	for i := range dirs {
		dirs[i] = "/d/" + strings.Repeat("x", i+1)
	}
	cases := []struct {
		name  string
		e     ContainerEngine
		field string // "" = valid
	}{
		{"full report", ContainerEngine{Engine: "docker 20.10.21", APIVersion: "1.41", GPUs: true,
			Images: images[:MaxEngineImages], AllowMounts: dirs[:MaxMounts]}, ""},
		{"an engine that did not answer", ContainerEngine{Error: strings.Repeat("e", MaxEngineErrorLen)}, ""},
		{"long engine name", ContainerEngine{Engine: strings.Repeat("d", MaxEngineFieldLen+1)}, "containers.engine"},
		{"long API version", ContainerEngine{APIVersion: strings.Repeat("1", MaxEngineFieldLen+1)}, "containers.api_version"},
		{"long error", ContainerEngine{Error: strings.Repeat("e", MaxEngineErrorLen+1)}, "containers.error"},
		{"too many images", ContainerEngine{Images: images}, "containers.images"},
		{"empty image", ContainerEngine{Images: []string{""}}, "containers.images"},
		{"long image", ContainerEngine{Images: []string{strings.Repeat("i", MaxImageRefLen+1)}}, "containers.images"},
		{"too many allowed mounts", ContainerEngine{AllowMounts: dirs}, "containers.allow_mounts"},
		{"relative allowed mount", ContainerEngine{AllowMounts: []string{"data"}}, "containers.allow_mounts"},
		{"unclean allowed mount", ContainerEngine{AllowMounts: []string{"/data/.."}}, "containers.allow_mounts"},
		{"long allowed mount", ContainerEngine{AllowMounts: []string{"/" + strings.Repeat("p", MaxMountPathLen)}}, "containers.allow_mounts"},
		{"allowed capabilities", ContainerEngine{Engine: "docker 20.10.21", AllowCaps: []string{"NET_RAW", "CHOWN"}}, ""},
		{"an unknown allowed capability", ContainerEngine{AllowCaps: []string{"NET_RAWR"}}, "containers.allow_caps"},
		{"an allowed capability spelled otherwise", ContainerEngine{AllowCaps: []string{"CAP_NET_RAW"}}, "containers.allow_caps"},
		{"an allowed capability twice", ContainerEngine{AllowCaps: []string{"CHOWN", "CHOWN"}}, "containers.allow_caps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.e.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("Validate() = %v, want a %s error", err, c.field)
			}
		})
	}
}

func TestMountAllowed_OnPathComponentBoundaries(t *testing.T) {
	allow := []string{"/data", "/scratch/team"}
	cases := map[string]bool{
		"/data": true, "/data/x": true, "/data/x/y": true, "/scratch/team/a": true,
		"/database": false, "/dat": false, "/scratch": false, "/scratch/teammate": false, "/": false, "/etc": false,
	}
	for src, want := range cases {
		if got := MountAllowed(src, allow); got != want {
			t.Errorf("MountAllowed(%q, %q) = %v, want %v", src, allow, got, want)
		}
	}
	if !MountAllowed("/anything", []string{"/"}) {
		t.Error(`an allowed "/" should allow every path`)
	}
	if MountAllowed("/data", nil) {
		t.Error("no allowed directory should allow nothing")
	}
}

func TestContainerEngine_HoldsAnUntaggedImageAsLatest(t *testing.T) {
	e := &ContainerEngine{Engine: "docker 20.10.21", Images: []string{"busybox:latest", "localhost:5000/train:v2", "pytorch:24.01"}}
	cases := map[string]bool{
		"busybox": true, "busybox:latest": true, "busybox:1.36": false,
		"localhost:5000/train:v2": true, "localhost:5000/train": false,
		"pytorch": false, "pytorch:24.01": true, "": false,
		"busybox@sha256:" + strings.Repeat("a", 64): false,
	}
	for ref, want := range cases {
		if got := e.Holds(ref); got != want {
			t.Errorf("Holds(%q) = %v, want %v", ref, got, want)
		}
	}
	if (*ContainerEngine)(nil).Holds("busybox") {
		t.Error("a node without an engine holds no image")
	}
}

func TestContainerEngine_Answers(t *testing.T) {
	cases := []struct {
		name string
		e    *ContainerEngine
		want bool
	}{
		{"no engine probed", nil, false},
		{"engine answered", &ContainerEngine{Engine: "docker 20.10.21", APIVersion: "1.41"}, true},
		{"engine did not answer", &ContainerEngine{Error: "connect: no such file"}, false},
		{"nothing said", &ContainerEngine{}, false},
	}
	for _, c := range cases {
		if got := c.e.Answers(); got != c.want {
			t.Errorf("%s: Answers() = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseCap_TakesAnySpellingOfAKnownName(t *testing.T) {
	for in, want := range map[string]string{"NET_RAW": "NET_RAW", "net_raw": "NET_RAW", "CAP_NET_BIND_SERVICE": "NET_BIND_SERVICE",
		"cap_sys_admin": "SYS_ADMIN", "Cap_Chown": "CHOWN"} {
		if got, err := ParseCap(in); got != want || err != nil {
			t.Errorf("ParseCap(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "CAP_", "ALL", "NET RAW", "CAP_CAP_NET_RAW", "NET_RAW\n"} {
		if got, err := ParseCap(in); err == nil || !strings.Contains(err.Error(), "is not a Linux capability") {
			t.Errorf("ParseCap(%q) = %q, %v; want it refused", in, got, err)
		}
	}
}

func TestJobSpec_NormalizeSpellsCapabilitiesOneWay(t *testing.T) {
	s := validSpec()
	s.Image = "busybox"
	s.Caps = []string{"cap_net_raw", "Sys_Ptrace", "NOPE"}
	s.Normalize()
	if !slices.Equal(s.Caps, []string{"NET_RAW", "SYS_PTRACE", "NOPE"}) {
		t.Errorf("Normalize left caps %q", s.Caps)
	}
	var fe *FieldError
	if err := s.Validate(); !errors.As(err, &fe) || fe.Field != "caps" || !strings.Contains(fe.Msg, `"NOPE"`) {
		t.Errorf("Validate() = %v, want the unknown capability refused", err)
	}
}

func TestCapsAllowed(t *testing.T) {
	allow := []string{"NET_RAW", "CHOWN"}
	for _, c := range []struct {
		caps []string
		want bool
	}{{nil, true}, {[]string{"CHOWN"}, true}, {[]string{"CHOWN", "NET_RAW"}, true}, {[]string{"CHOWN", "SYS_ADMIN"}, false}} {
		if got := CapsAllowed(c.caps, allow); got != c.want {
			t.Errorf("CapsAllowed(%q, %q) = %v, want %v", c.caps, allow, got, c.want)
		}
	}
	if CapsAllowed([]string{"CHOWN"}, nil) {
		t.Error("a node that allows nothing allows CHOWN")
	}
}
