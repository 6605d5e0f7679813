package trust

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The files of a Store.
const (
	caCertFile   = "ca.crt"
	caKeyFile    = "ca.key"
	nodeCertFile = "node.crt"
	nodeKeyFile  = "node.key"

	dirMode  fs.FileMode = 0o700
	keyMode  fs.FileMode = 0o600
	certMode fs.FileMode = 0o644
)

// Store keeps a node's TLS material in one directory (the agent's is
// <data-dir>/tls): the CA bundle ca.crt, the CA key ca.key on the nodes
// that hold it, and the node's own node.crt and node.key. Every write is
// atomic: a reader sees the old file or the new one, never a mix. Key
// files are written 0600, and a key file that others may read is refused
// on load.
type Store struct {
	dir string
}

// NewStore returns the Store of dir, creating the directory (0700) if it
// does not exist.
func NewStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("create tls directory: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Dir returns the Store's directory.
func (s *Store) Dir() string { return s.dir }

// SaveCA writes the CA bundle (PEM, one certificate or more, the current
// one first) and, when keyPEM is not nil, the CA key. A nil keyPEM leaves
// a key already stored as it is: nodes without the CA key pass nil, and
// so does a node that only updates its bundle.
func (s *Store) SaveCA(certsPEM, keyPEM []byte) error {
	if _, err := ParseCerts(certsPEM); err != nil {
		return fmt.Errorf("save CA bundle: %w", err)
	}
	if keyPEM != nil {
		if err := s.write(caKeyFile, keyPEM, keyMode); err != nil {
			return err
		}
	}
	return s.write(caCertFile, certsPEM, certMode)
}

// LoadCABundle returns the CA bundle, PEM. The error wraps os.ErrNotExist
// when there is none.
func (s *Store) LoadCABundle() ([]byte, error) {
	return s.read(caCertFile)
}

// LoadCAKey returns the CA key, PEM. The error wraps os.ErrNotExist when
// this node does not hold the CA key, and ErrKeyFileMode when the file
// may be read by others.
func (s *Store) LoadCAKey() ([]byte, error) {
	return s.readKey(caKeyFile)
}

// HasCAKey reports whether this node holds the CA key.
func (s *Store) HasCAKey() bool {
	_, err := os.Stat(filepath.Join(s.dir, caKeyFile))
	return err == nil
}

// SaveNode writes the node's certificate and key, both PEM, the key first.
// The two files are replaced one after the other: a crash between the two
// leaves a new key beside the old certificate, which NewIdentity refuses
// (ErrKeyMismatch), so a node that renews with a new key must be ready to
// be admitted again.
func (s *Store) SaveNode(certPEM, keyPEM []byte) error {
	if err := s.write(nodeKeyFile, keyPEM, keyMode); err != nil {
		return err
	}
	return s.write(nodeCertFile, certPEM, certMode)
}

// LoadNode returns the node's certificate and key, PEM. The error wraps
// os.ErrNotExist when either is missing, and ErrKeyFileMode when the key
// file may be read by others.
func (s *Store) LoadNode() (certPEM, keyPEM []byte, err error) {
	keyPEM, err = s.readKey(nodeKeyFile)
	if err != nil {
		return nil, nil, err
	}
	certPEM, err = s.read(nodeCertFile)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func (s *Store) read(name string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// readKey reads a key file after checking that only its owner may read it.
func (s *Store) readKey(name string) ([]byte, error) {
	path := filepath.Join(s.dir, name)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		return nil, fmt.Errorf("read %s: %w: mode %04o, want %04o (chmod 600 %s)", name, ErrKeyFileMode, mode, keyMode, path)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// write replaces name atomically: a temporary file in the same directory
// is written, synced, given its mode and renamed over name, and the
// directory is synced so the rename survives a crash.
func (s *Store) write(name string, data []byte, mode fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(s.dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("write %s: %w", name, err)
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(s.dir, name)); err != nil {
		return err
	}
	return syncDir(s.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, errors.ErrUnsupported) {
		return nil // some file systems cannot sync a directory
	}
	return err
}
