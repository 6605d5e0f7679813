package structs

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestParseArraySpec(t *testing.T) {
	cases := []struct {
		name, in string
		want     *ArraySpec
		err      string
	}{
		{"range", "0-99", &ArraySpec{Start: 0, End: 99}, ""},
		{"range with a cap", "0-99%8", &ArraySpec{Start: 0, End: 99, MaxRunning: 8}, ""},
		{"one task", "5-5", &ArraySpec{Start: 5, End: 5}, ""},
		{"backwards is left to Validate", "5-2", &ArraySpec{Start: 5, End: 2}, ""},
		{"no range", "ten", nil, `invalid array "ten": want START-END or START-END%MAX, like 0-99%8`},
		{"one number", "10", nil, `invalid array "10"`},
		{"bad end", "0-x", nil, `invalid array "0-x"`},
		{"bad cap", "0-9%all", nil, `invalid array "0-9%all"`},
		{"empty", "", nil, `invalid array ""`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseArraySpec(c.in)
			checkParse(t, c.in, got, err, c.want, c.err)
		})
	}
}

func TestParseDependency(t *testing.T) {
	cases := []struct {
		name, in string
		want     Dependency
		err      string
	}{
		{"bare ID means ok", "abc123", Dependency{JobID: "abc123", Condition: AfterOK}, ""},
		{"ok", "abc123:ok", Dependency{JobID: "abc123", Condition: AfterOK}, ""},
		{"any", "abc123:any", Dependency{JobID: "abc123", Condition: AfterAny}, ""},
		{"notok", "abc123:notok", Dependency{JobID: "abc123", Condition: AfterNotOK}, ""},
		{"array task ID", "abc123-7:any", Dependency{JobID: "abc123-7", Condition: AfterAny}, ""},
		{"odd condition", "abc:maybe", Dependency{}, `invalid dependency "abc:maybe": want JOB_ID, JOB_ID:ok, JOB_ID:any or JOB_ID:notok`},
		{"upper case condition", "abc:OK", Dependency{}, `invalid dependency "abc:OK"`},
		{"no ID", ":ok", Dependency{}, `invalid dependency ":ok"`},
		{"empty", "", Dependency{}, `invalid dependency ""`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseDependency(c.in)
			checkParse(t, c.in, got, err, c.want, c.err)
		})
	}
}

func TestParsePortRange(t *testing.T) {
	cases := []struct {
		name, in string
		want     PortRange
		err      string
	}{
		{"range", "29500-29999", PortRange{Min: 29500, Max: 29999}, ""},
		{"one port", "40000-40000", PortRange{Min: 40000, Max: 40000}, ""},
		{"privileged is left to Validate", "80-90", PortRange{Min: 80, Max: 90}, ""},
		{"one number", "29500", PortRange{}, `invalid port range "29500": want MIN-MAX, like 29500-29999`},
		{"not numbers", "a-b", PortRange{}, `invalid port range "a-b"`},
		{"empty", "", PortRange{}, `invalid port range ""`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParsePortRange(c.in)
			checkParse(t, c.in, got, err, c.want, c.err)
		})
	}
}

// checkParse compares a parse result with a want: the value, or an error
// containing errText.
func checkParse[T any](t *testing.T, in string, got T, err error, want T, errText string) {
	t.Helper()
	if errText != "" {
		if err == nil || !strings.Contains(err.Error(), errText) {
			t.Fatalf("parse %q: error %v, want one containing %q", in, err, errText)
		}
		return
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("parse %q = %+v, %v; want %+v", in, got, err, want)
	}
}

// textFields holds one field of each type a job file writes as text.
type textFields struct {
	Duration Duration     `yaml:"duration"`
	Size     SizeMiB      `yaml:"size"`
	Signal   *TimeSignal  `yaml:"signal"`
	Array    *ArraySpec   `yaml:"array"`
	After    []Dependency `yaml:"after"`
}

func TestValueTypes_DecodeFromYAMLText(t *testing.T) {
	doc := "duration: 90m\nsize: 80G\nsignal: sigusr1@90\narray: 0-9%2\nafter: [abc, \"def:any\"]\n"
	var got textFields
	if err := yaml.Unmarshal([]byte(doc), &got); err != nil {
		t.Fatal(err)
	}
	want := textFields{
		Duration: Duration(90 * time.Minute),
		Size:     80 * 1024,
		Signal:   &TimeSignal{Name: "USR1", Before: Duration(90 * time.Second)},
		Array:    &ArraySpec{Start: 0, End: 9, MaxRunning: 2},
		After:    []Dependency{{JobID: "abc", Condition: AfterOK}, {JobID: "def", Condition: AfterAny}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got, want)
	}
	// YAML reads 512 as a number; the size still means MiB.
	if err := yaml.Unmarshal([]byte("size: 512"), &got); err != nil || got.Size != 512 {
		t.Fatalf("size: 512 decoded to %d, %v; want 512 MiB", got.Size, err)
	}
}

func TestValueTypes_YAMLErrorsComeFromTheirParser(t *testing.T) {
	cases := []struct{ doc, err string }{
		{"duration: soon", `invalid duration "soon"`},
		{"duration: 90", `invalid duration "90"`},
		{"size: 12Q", `invalid size "12Q"`},
		{"size: 65T", "larger than the limit of 67108864 MiB"},
		{"signal: KILL", `invalid signal "KILL"`},
		{"array: ten", `invalid array "ten"`},
		{"after: [\"a:maybe\"]", `invalid dependency "a:maybe"`},
		{"array: {start: 0, end: 9}", errNotText.Error()},
		{"signal: [USR1]", errNotText.Error()},
		{"after: [{job_id: a}]", errNotText.Error()},
	}
	for _, c := range cases {
		var got textFields
		if err := yaml.Unmarshal([]byte(c.doc), &got); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("decode %q: error %v, want one containing %q", c.doc, err, c.err)
		}
	}
}
