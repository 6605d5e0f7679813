package trust

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := NewStore(filepath.Join(t.TempDir(), "tls"))
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	return s
}

func TestStore_CARoundTrip(t *testing.T) {
	s := newTestStore(t)
	ca := newTestCA(t)
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if s.HasCAKey() {
		t.Error("an empty store holds a CA key")
	}
	bundle := append(append([]byte{}, ca.CertPEM...), newTestCA(t).CertPEM...)
	if err := s.SaveCA(bundle, keyPEM); err != nil {
		t.Fatalf("SaveCA: %v", err)
	}
	if !s.HasCAKey() {
		t.Error("HasCAKey is false after SaveCA with a key")
	}
	gotBundle, err := s.LoadCABundle()
	if err != nil || !bytes.Equal(gotBundle, bundle) {
		t.Fatalf("LoadCABundle = %d bytes, %v; want the saved bundle", len(gotBundle), err)
	}
	gotKey, err := s.LoadCAKey()
	if err != nil {
		t.Fatalf("LoadCAKey: %v", err)
	}
	got, err := ParseCA(gotBundle, gotKey)
	if err != nil {
		t.Fatalf("ParseCA of the stored CA: %v", err)
	}
	if Fingerprint(got.Cert) != Fingerprint(ca.Cert) {
		t.Error("stored CA differs from the saved one")
	}
}

func TestStore_CAWithoutKey(t *testing.T) {
	s := newTestStore(t)
	ca := newTestCA(t)
	if _, err := s.LoadCABundle(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadCABundle of an empty store: error %v, want %v", err, os.ErrNotExist)
	}
	if err := s.SaveCA(ca.CertPEM, nil); err != nil {
		t.Fatalf("SaveCA: %v", err)
	}
	if s.HasCAKey() {
		t.Error("HasCAKey is true after SaveCA without a key")
	}
	if _, err := s.LoadCAKey(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadCAKey without a key: error %v, want %v", err, os.ErrNotExist)
	}

	// A bundle saved later without a key leaves the stored key alone.
	keyPEM, _ := ca.KeyPEM()
	if err := s.SaveCA(ca.CertPEM, keyPEM); err != nil {
		t.Fatalf("SaveCA: %v", err)
	}
	if err := s.SaveCA(append(append([]byte{}, ca.CertPEM...), newTestCA(t).CertPEM...), nil); err != nil {
		t.Fatalf("SaveCA: %v", err)
	}
	if got, err := s.LoadCAKey(); err != nil || !bytes.Equal(got, keyPEM) {
		t.Errorf("LoadCAKey after a bundle update = %v; want the key saved before", err)
	}
}

func TestStore_SaveCARefusesWhatIsNotACertificate(t *testing.T) {
	s := newTestStore(t)
	_, keyPEM, _ := NewKey()
	if err := s.SaveCA(keyPEM, nil); !errors.Is(err, ErrNoCertificate) {
		t.Errorf("SaveCA of a key as bundle: error %v, want %v", err, ErrNoCertificate)
	}
	if _, err := s.LoadCABundle(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused bundle was written: %v", err)
	}
}

func TestStore_NodeRoundTrip(t *testing.T) {
	s := newTestStore(t)
	if _, _, err := s.LoadNode(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadNode of an empty store: error %v, want %v", err, os.ErrNotExist)
	}
	ca := newTestCA(t)
	certPEM, keyPEM := issue(t, ca, newNodeID(t), time.Hour, time.Now())
	if err := s.SaveNode(certPEM, keyPEM); err != nil {
		t.Fatalf("SaveNode: %v", err)
	}
	gotCert, gotKey, err := s.LoadNode()
	if err != nil {
		t.Fatalf("LoadNode: %v", err)
	}
	if !bytes.Equal(gotCert, certPEM) || !bytes.Equal(gotKey, keyPEM) {
		t.Error("LoadNode returned other bytes than SaveNode wrote")
	}
	if _, err := NewIdentity(gotCert, gotKey, ca.CertPEM); err != nil {
		t.Errorf("NewIdentity from the stored files: %v", err)
	}
}

func TestStore_WritesKeysForTheOwnerOnly(t *testing.T) {
	s := newTestStore(t)
	ca := newTestCA(t)
	caKey, _ := ca.KeyPEM()
	certPEM, keyPEM := issue(t, ca, newNodeID(t), time.Hour, time.Now())
	if err := s.SaveCA(ca.CertPEM, caKey); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveNode(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{"ca.crt": 0o644, "ca.key": 0o600, "node.crt": 0o644, "node.key": 0o600}
	entries, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only %d files (no temporary file left)", names, len(want))
	}
	for name, mode := range want {
		fi, err := os.Stat(filepath.Join(s.Dir(), name))
		if err != nil {
			t.Errorf("stat %s: %v", name, err)
			continue
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("%s has mode %04o, want %04o", name, got, mode)
		}
	}
	fi, err := os.Stat(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("directory has mode %04o, want 0700", got)
	}
}

func TestStore_RefusesKeyFilesOthersCanRead(t *testing.T) {
	ca := newTestCA(t)
	caKey, _ := ca.KeyPEM()
	certPEM, keyPEM := issue(t, ca, newNodeID(t), time.Hour, time.Now())
	load := map[string]func(s *Store) error{
		"ca.key":   func(s *Store) error { _, err := s.LoadCAKey(); return err },
		"node.key": func(s *Store) error { _, _, err := s.LoadNode(); return err },
	}
	for file, loadFile := range load {
		for _, mode := range []fs.FileMode{0o644, 0o640, 0o604, 0o666} {
			t.Run(file+"/"+mode.String(), func(t *testing.T) {
				s := newTestStore(t)
				if err := s.SaveCA(ca.CertPEM, caKey); err != nil {
					t.Fatal(err)
				}
				if err := s.SaveNode(certPEM, keyPEM); err != nil {
					t.Fatal(err)
				}
				if err := loadFile(s); err != nil {
					t.Fatalf("load with mode 0600: %v", err)
				}
				if err := os.Chmod(filepath.Join(s.Dir(), file), mode); err != nil {
					t.Fatal(err)
				}
				err := loadFile(s)
				if !errors.Is(err, ErrKeyFileMode) {
					t.Fatalf("load with mode %04o: error %v, want %v", mode, err, ErrKeyFileMode)
				}
				if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "chmod 600") {
					t.Errorf("error %q does not name the file and the fix", err)
				}
			})
		}
	}
}
