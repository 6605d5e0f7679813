package structs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRole_PermissionsGrowWithTheRole(t *testing.T) {
	want := map[Role][]Permission{
		RoleReader:    {PermRead},
		RoleSubmitter: {PermRead, PermSubmit},
		RoleOperator:  {PermRead, PermSubmit, PermAnyJob, PermLoaderEnv, PermNodes},
		RoleAdmin:     {PermRead, PermSubmit, PermAnyJob, PermLoaderEnv, PermNodes, PermACL},
	}
	for role, perms := range want {
		for _, p := range Permissions {
			has := false
			for _, q := range perms {
				has = has || q == p
			}
			if role.Can(p) != has {
				t.Errorf("%s.Can(%s) = %v, want %v", role, p, role.Can(p), has)
			}
		}
	}
	if Role("root").Can(PermRead) {
		t.Error("an unknown role holds a permission")
	}
}

func TestParseRole_RefusesUnknownRoles(t *testing.T) {
	for _, r := range Roles {
		if got, err := ParseRole(string(r)); err != nil || got != r {
			t.Errorf("ParseRole(%q) = %q, %v", r, got, err)
		}
	}
	_, err := ParseRole("superuser")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "role" || !strings.Contains(err.Error(), "reader, submitter, operator, admin") {
		t.Errorf("ParseRole(superuser) = %v, want a role field error listing the roles", err)
	}
}

func TestPermissionError_NamesTheMissingPermissionAndWhoHasIt(t *testing.T) {
	err := error(&PermissionError{Role: RoleSubmitter, Need: PermNodes, What: "cordon a GPU"})
	want := "permission denied: role submitter lacks nodes to cordon a GPU (roles from operator have it)"
	if err.Error() != want {
		t.Errorf("got %q\nwant %q", err, want)
	}
	if !errors.Is(err, ErrPermission) {
		t.Error("a PermissionError is not an ErrPermission")
	}
}

func TestACLToken_Validate(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	good := func() ACLToken {
		return ACLToken{ID: strings.Repeat("a", ACLTokenIDLen), SecretHash: strings.Repeat("b", 64), User: "alice", Role: RoleSubmitter, CreatedAt: at}
	}
	cases := []struct {
		name  string
		edit  func(*ACLToken)
		field string
	}{
		{"valid", func(*ACLToken) {}, ""},
		{"short id", func(t *ACLToken) { t.ID = "abc" }, "id"},
		{"upper-case hash", func(t *ACLToken) { t.SecretHash = strings.Repeat("B", 64) }, "secret_hash"},
		{"no user", func(t *ACLToken) { t.User = "" }, "user"},
		{"bad role", func(t *ACLToken) { t.Role = "god" }, "role"},
		{"long description", func(t *ACLToken) { t.Description = strings.Repeat("x", MaxDescriptionLen+1) }, "description"},
		{"expires before it is made", func(t *ACLToken) { t.ExpiresAt = at.Add(-time.Second) }, "expires_at"},
		{"lives too long", func(t *ACLToken) { t.ExpiresAt = at.Add(MaxACLTokenTTL + time.Hour) }, "ttl"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := good()
			c.edit(&tok)
			err := tok.Validate()
			var fe *FieldError
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
				t.Fatalf("Validate = %v, want an error on %s", err, c.field)
			}
		})
	}
}

func TestJobSpec_SecretEnvIsCheckedLikeEnv(t *testing.T) {
	s := JobSpec{Command: []string{"true"}, Nodes: 1, Env: map[string]string{"A": "1"}, SecretEnv: map[string]string{"A": "2"}}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "secret_env: A is in env too") {
		t.Errorf("a name in env and secret_env: %v", err)
	}
	s.SecretEnv = map[string]string{"CUDA_VISIBLE_DEVICES": "0"}
	if err := s.Validate(); err == nil || !strings.HasPrefix(err.Error(), "secret_env: CUDA_VISIBLE_DEVICES is set by skein") {
		t.Errorf("a reserved name in secret_env: %v", err)
	}
	s.SecretEnv = map[string]string{"TOKEN": "x"}
	if err := s.Validate(); err != nil {
		t.Errorf("a valid secret_env: %v", err)
	}
}

func TestIsLoaderEnv(t *testing.T) {
	for name, want := range map[string]bool{"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true, "PATH": false, "OLD_PRELOAD": false} {
		if IsLoaderEnv(name) != want {
			t.Errorf("IsLoaderEnv(%s) = %v", name, !want)
		}
	}
}
