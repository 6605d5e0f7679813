package secure

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// gossipKeyLen is the length of a gossip key: AES-256.
const gossipKeyLen = 32

// newGossipKey returns a random gossip key.
func newGossipKey() ([]byte, error) {
	key := make([]byte, gossipKeyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make a gossip key: %w", err)
	}
	return key, nil
}

// newSecret returns 32 random bytes, base64url: an API token.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func encodeKey(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

func decodeKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(k) != gossipKeyLen {
		return nil, errors.New("gossip key: want 32 bytes, base64")
	}
	return k, nil
}

// GossipKeys returns the installed keyring as memberlist takes it: the
// primary key and the others.
func (s *Secure) GossipKeys() (primary []byte, others [][]byte, err error) {
	s.keyringMu.Lock()
	ring := s.keyring
	s.keyringMu.Unlock()
	return decodeRing(ring)
}

// KeyringGeneration is the generation of the keyring this node installed.
func (s *Secure) KeyringGeneration() uint64 {
	s.keyringMu.Lock()
	defer s.keyringMu.Unlock()
	return s.keyring.Generation
}

func decodeRing(ring structs.Keyring) (primary []byte, others [][]byte, err error) {
	keys := ring.Keys()
	for i, k := range keys {
		b, err := decodeKey(k)
		if err != nil {
			return nil, nil, fmt.Errorf("keyring generation %d: %w", ring.Generation, err)
		}
		if i == 0 {
			primary = b
		} else {
			others = append(others, b)
		}
	}
	return primary, others, nil
}

func (s *Secure) keyringPath() string { return filepath.Join(s.store.Dir(), "keyring.json") }

// loadKeyring reads the keyring this node installed last.
func (s *Secure) loadKeyring() error {
	b, err := os.ReadFile(s.keyringPath())
	if err != nil {
		return fmt.Errorf("read the gossip keyring: %w", err)
	}
	var ring structs.Keyring
	if err := json.Unmarshal(b, &ring); err != nil {
		return fmt.Errorf("read the gossip keyring %s: %w", s.keyringPath(), err)
	}
	if _, _, err := decodeRing(ring); err != nil {
		return fmt.Errorf("read the gossip keyring %s: %w", s.keyringPath(), err)
	}
	s.keyringMu.Lock()
	s.keyring = ring
	s.keyringMu.Unlock()
	return nil
}

// saveKeyring records ring as installed, 0600, atomically.
func (s *Secure) saveKeyring(ring structs.Keyring) error {
	b, err := json.Marshal(ring)
	if err != nil {
		return err
	}
	path := s.keyringPath()
	tmp := path + ".tmp"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write the gossip keyring: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write the gossip keyring: %w", err)
	}
	s.keyringMu.Lock()
	s.keyring = ring
	s.keyringMu.Unlock()
	return nil
}

// nextRing is the keyring a rotation step makes of ring: a new key comes
// in as Next, then becomes primary, then the old one goes. It reports
// false when ring is not rotating and newKey is nil.
func nextRing(ring structs.Keyring, newKey []byte) (structs.Keyring, bool) {
	next := structs.Keyring{Primary: ring.Primary, Generation: ring.Generation + 1}
	switch {
	case ring.Next != "":
		next.Primary = ring.Next
		next.Others = append(slices.Clone(ring.Others), ring.Primary)
	case len(ring.Others) > 0:
	case newKey != nil:
		next.Next = encodeKey(newKey)
	default:
		return ring, false
	}
	return next, true
}
