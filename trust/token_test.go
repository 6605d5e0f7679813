package trust

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// testFingerprint is a well-formed CA fingerprint.
const testFingerprint = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestNewJoinToken_MakesRandomWellFormedTokens(t *testing.T) {
	a, err := NewJoinToken(testFingerprint)
	if err != nil {
		t.Fatalf("NewJoinToken: %v", err)
	}
	b, err := NewJoinToken(testFingerprint)
	if err != nil {
		t.Fatalf("NewJoinToken: %v", err)
	}
	if a.ID == b.ID || a.Secret == b.Secret {
		t.Error("two tokens share an ID or a secret")
	}
	if !isLowerHex(a.ID, 8) {
		t.Errorf("ID %q is not 8 lowercase hex characters", a.ID)
	}
	raw, err := base64.RawURLEncoding.DecodeString(a.Secret)
	if err != nil || len(raw) != 32 {
		t.Errorf("secret is not 32 bytes of unpadded base64url: %d bytes, %v", len(raw), err)
	}
	if a.CAFingerprint != testFingerprint {
		t.Errorf("CAFingerprint %q, want %q", a.CAFingerprint, testFingerprint)
	}
	for _, fp := range []string{"", "0123", testFingerprint[len("sha256:"):], strings.ToUpper(testFingerprint)} {
		if _, err := NewJoinToken(fp); !errors.Is(err, ErrBadFingerprint) {
			t.Errorf("NewJoinToken(%q): error %v, want %v", fp, err, ErrBadFingerprint)
		}
	}
}

func TestJoinToken_RoundTripsThroughString(t *testing.T) {
	ca := newTestCA(t)
	tok, err := NewJoinToken(Fingerprint(ca.Cert))
	if err != nil {
		t.Fatalf("NewJoinToken: %v", err)
	}
	s := tok.String()
	want := "SKJ1." + tok.ID + "." + tok.Secret + "." + strings.TrimPrefix(Fingerprint(ca.Cert), "sha256:")
	if s != want {
		t.Errorf("String = %q, want %q", s, want)
	}
	for _, in := range []string{s, s + "\n", "  " + s + "\r\n", "\t" + s} {
		got, err := ParseJoinToken(in)
		if err != nil {
			t.Fatalf("ParseJoinToken(%q): %v", in, err)
		}
		if got != tok {
			t.Errorf("ParseJoinToken(String()) = %+v, want %+v", got, tok)
		}
	}
}

func TestParseJoinToken_RefusesMalformedTokens(t *testing.T) {
	const (
		id     = "0a1b2c3d"
		secret = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8" // 32 bytes
		fp     = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	)
	if _, err := ParseJoinToken("SKJ1." + id + "." + secret + "." + fp); err != nil {
		t.Fatalf("the well-formed token of this table is refused: %v", err)
	}
	tests := []struct {
		name, token, saying string
	}{
		{"empty", "", "SKJ1."},
		{"only spaces", "  \n", "SKJ1."},
		{"another version", "SKJ2." + id + "." + secret + "." + fp, "SKJ1."},
		{"no prefix", id + "." + secret + "." + fp, "SKJ1."},
		{"lower-case prefix", "skj1." + id + "." + secret + "." + fp, "SKJ1."},
		{"no fingerprint", "SKJ1." + id + "." + secret, "3 dot-separated parts"},
		{"a part too many", "SKJ1." + id + "." + secret + "." + fp + ".x", "5 dot-separated parts"},
		{"space inside", "SKJ1." + id + ". " + secret + "." + fp, "secret"},
		{"short id", "SKJ1.0a1b2c3." + secret + "." + fp, "id"},
		{"upper-case id", "SKJ1.0A1B2C3D." + secret + "." + fp, "id"},
		{"secret with padding", "SKJ1." + id + "." + secret + "=." + fp, "secret"},
		{"standard base64 secret", "SKJ1." + id + "." + strings.Replace(secret, "E", "+", 1) + "." + fp, "secret"},
		{"short secret", "SKJ1." + id + "." + secret[:40] + "." + fp, "secret"},
		{"long secret", "SKJ1." + id + "." + secret + "AAAA." + fp, "secret"},
		{"secret with stray low bits", "SKJ1." + id + "." + secret[:42] + "9." + fp, "secret"},
		{"empty secret", "SKJ1." + id + ".." + fp, "secret"},
		{"fingerprint with its prefix", "SKJ1." + id + "." + secret + ".sha256:" + fp, "fingerprint"},
		{"short fingerprint", "SKJ1." + id + "." + secret + "." + fp[:63], "fingerprint"},
		{"upper-case fingerprint", "SKJ1." + id + "." + secret + "." + strings.ToUpper(fp), "fingerprint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseJoinToken(tt.token)
			if !errors.Is(err, ErrBadToken) {
				t.Fatalf("ParseJoinToken = %+v, %v; want %v", got, err, ErrBadToken)
			}
			if !strings.Contains(err.Error(), tt.saying) {
				t.Errorf("error %q does not say %q", err, tt.saying)
			}
			if strings.Contains(err.Error(), secret[:16]) {
				t.Errorf("error %q quotes the secret", err)
			}
			if got != (JoinToken{}) {
				t.Errorf("ParseJoinToken returned %+v with its error", got)
			}
		})
	}
}

func TestHashSecret_IsSHA256HexAndComparesEqualHashes(t *testing.T) {
	// SHA-256 of "abc" (FIPS 180-2, appendix B.1).
	const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := HashSecret("abc"); got != abc {
		t.Errorf("HashSecret(abc) = %s, want %s", got, abc)
	}
	if !EqualHash(HashSecret("abc"), abc) {
		t.Error("EqualHash of equal hashes is false")
	}
	for _, other := range []string{HashSecret("abd"), abc[:63], "", abc + "0"} {
		if EqualHash(abc, other) {
			t.Errorf("EqualHash(%q, %q) is true", abc, other)
		}
	}
}

func FuzzParseJoinToken(f *testing.F) {
	f.Add("SKJ1.0a1b2c3d.AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	f.Add("")
	f.Add("SKJ1....")
	f.Add(" SKJ1.x.y.z\n")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseJoinToken(s)
		if err != nil {
			if !errors.Is(err, ErrBadToken) {
				t.Fatalf("error %v does not wrap %v", err, ErrBadToken)
			}
			return
		}
		again, err := ParseJoinToken(tok.String())
		if err != nil || again != tok {
			t.Fatalf("a parsed token does not round trip: %+v, %v", again, err)
		}
		if err := checkFingerprint(tok.CAFingerprint); err != nil {
			t.Fatalf("a parsed token's fingerprint is malformed: %v", err)
		}
	})
}

func TestACLToken_RoundTripsAndRefusesMalformedTokens(t *testing.T) {
	a, err := NewACLToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewACLToken()
	if a.ID == b.ID || a.Secret == b.Secret {
		t.Fatal("two tokens share an ID or a secret")
	}
	back, err := ParseACLToken(" " + a.String() + "\n")
	if err != nil || back != a {
		t.Fatalf("ParseACLToken(String()) = %+v, %v; want %+v", back, err, a)
	}
	if !LooksLikeACLToken(a.String()) || LooksLikeACLToken("demo") {
		t.Error("LooksLikeACLToken does not tell an ACL token from a plain one")
	}
	for name, s := range map[string]string{
		"join token":   "SKJ1." + a.ID + "." + a.Secret,
		"two parts":    "SKA1." + a.ID,
		"short id":     "SKA1.abc." + a.Secret,
		"upper id":     "SKA1." + strings.ToUpper(a.ID) + "." + a.Secret,
		"short secret": "SKA1." + a.ID + ".abc",
		"four parts":   a.String() + ".x",
	} {
		_, err := ParseACLToken(s)
		if !errors.Is(err, ErrBadACLToken) {
			t.Errorf("%s: %v, want ErrBadACLToken", name, err)
		}
		if err != nil && strings.Contains(err.Error(), a.Secret) {
			t.Errorf("%s: the error quotes the secret", name)
		}
	}
}

func FuzzParseACLToken(f *testing.F) {
	tok, _ := NewACLToken()
	f.Add(tok.String())
	f.Add("SKA1..")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseACLToken(s)
		if err == nil {
			if again, err := ParseACLToken(got.String()); err != nil || again != got {
				t.Fatalf("a parsed token does not round-trip: %v", err)
			}
		}
	})
}
