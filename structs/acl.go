package structs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Access control (docs/architecture.md, "Security model"): users hold ACL tokens, each
// naming a user and a role; a role is a fixed set of permissions. The
// cluster keeps tokens hashed, in Raft, so every node checks them and a
// revocation holds everywhere once its entry is applied.
//
// A cluster has ACLs from its bootstrap on (`skein acl bootstrap`, once).
// Until then the cluster's API token (or none, on loopback) is the only
// credential and holds every permission, and jobs have no owner.

// Role is what a token's holder may do.
type Role string

// Roles, each holding the permissions of the one before it and more.
const (
	// RoleReader sees the cluster: nodes, GPUs, jobs (the values of
	// others' environment hidden), status, limits.
	RoleReader Role = "reader"
	// RoleSubmitter also submits jobs, and cancels, reads the logs and
	// sees the environment of its own.
	RoleSubmitter Role = "submitter"
	// RoleOperator also runs the nodes (join, leave, revoke, join tokens,
	// the keyring, GPU cordon and faults), acts on anyone's jobs and may
	// set the dynamic loader's variables in a job.
	RoleOperator Role = "operator"
	// RoleAdmin also manages ACL tokens, users' root allowance, limits,
	// and reads the audit log.
	RoleAdmin Role = "admin"
)

// Roles lists the roles, least first.
var Roles = []Role{RoleReader, RoleSubmitter, RoleOperator, RoleAdmin}

// Permission is one thing a role may do; 403 answers name the one missing.
type Permission string

// Permissions.
const (
	// PermRead: read the cluster's state.
	PermRead Permission = "read"
	// PermSubmit: submit jobs; cancel, read the logs and see the
	// environment of one's own jobs.
	PermSubmit Permission = "submit"
	// PermAnyJob: cancel, read the logs and see the environment of
	// anyone's jobs.
	PermAnyJob Permission = "jobs:any"
	// PermLoaderEnv: set LD_* variables (LD_PRELOAD, LD_LIBRARY_PATH ...)
	// in a job's environment.
	PermLoaderEnv Permission = "env:loader"
	// PermNodes: run the cluster's nodes and GPUs.
	PermNodes Permission = "nodes"
	// PermACL: tokens, users, limits, the audit log.
	PermACL Permission = "acl"
)

// Permissions lists every permission, in the order the roles gain them.
var Permissions = []Permission{PermRead, PermSubmit, PermAnyJob, PermLoaderEnv, PermNodes, PermACL}

// rolePerms is what each role adds to the one before it.
var rolePerms = map[Role][]Permission{
	RoleReader:    {PermRead},
	RoleSubmitter: {PermSubmit},
	RoleOperator:  {PermAnyJob, PermLoaderEnv, PermNodes},
	RoleAdmin:     {PermACL},
}

// MayActFor reports whether user, holding the role, may act on what owner
// owns (cancel a job, read its logs, see its environment): as that owner
// with PermSubmit, or with PermAnyJob.
func (r Role) MayActFor(user, owner string) bool {
	return r.Can(PermAnyJob) || owner == user && r.Can(PermSubmit)
}

// Can reports whether the role holds p.
func (r Role) Can(p Permission) bool {
	if !slices.Contains(Roles, r) {
		return false
	}
	for _, role := range Roles {
		if slices.Contains(rolePerms[role], p) {
			return true
		}
		if role == r {
			return false
		}
	}
	return false
}

// LeastWith returns the least role that holds p.
func LeastWith(p Permission) Role {
	for _, role := range Roles {
		if slices.Contains(rolePerms[role], p) {
			return role
		}
	}
	return RoleAdmin
}

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !slices.Contains(Roles, r) {
		return "", fieldErr("role", "%q: want one of %s", s, roleNames())
	}
	return r, nil
}

func roleNames() string {
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// IsLoaderEnv reports whether name is a variable of the dynamic loader,
// which changes what every program of a job loads (LD_PRELOAD,
// LD_LIBRARY_PATH, LD_AUDIT ...): setting one needs PermLoaderEnv.
func IsLoaderEnv(name string) bool { return strings.HasPrefix(name, "LD_") }

// ACL limits.
const (
	// MaxACLTokens is how many tokens the cluster keeps, revoked and
	// expired ones included until they are removed.
	MaxACLTokens = 10000
	// MaxACLTokenTTL is the longest a token may live before it expires.
	MaxACLTokenTTL = 10 * 365 * 24 * time.Hour
	// MaxDescriptionLen bounds a token's description.
	MaxDescriptionLen = 256
	// ACLTokenIDLen is the length of a token's ID, in hex characters.
	ACLTokenIDLen = 16
)

// ACLToken is the replicated record of an ACL token. The secret is kept
// only as its SHA-256 (hex); the token a user holds is made of the ID and
// the secret (trust.ACLToken).
type ACLToken struct {
	// ID names the token in listings, revocations and the audit log; it
	// is not secret.
	ID         string `json:"id"`
	SecretHash string `json:"secret_hash"`
	User       string `json:"user"`
	Role       Role   `json:"role"`
	// CreatedBy is the user whose token created this one ("" for the
	// bootstrap token).
	CreatedBy   string    `json:"created_by,omitempty"`
	Description string    `json:"description,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// ExpiresAt is when the token stops working; zero never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Revoked   bool      `json:"revoked,omitempty"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// Expired reports whether the token has expired at now.
func (t *ACLToken) Expired(now time.Time) bool {
	return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)
}

// Validate checks a token record before it is created.
func (t *ACLToken) Validate() error {
	if !isHex(t.ID, ACLTokenIDLen) {
		return fieldErr("id", "want %d lowercase hex characters", ACLTokenIDLen)
	}
	if !isHex(t.SecretHash, 64) {
		return fieldErr("secret_hash", "want a SHA-256 in lowercase hex")
	}
	if err := ValidateUserName(t.User); err != nil {
		return err
	}
	if _, err := ParseRole(string(t.Role)); err != nil {
		return err
	}
	if len(t.Description) > MaxDescriptionLen {
		return fieldErr("description", "%d bytes; at most %d", len(t.Description), MaxDescriptionLen)
	}
	if !t.ExpiresAt.IsZero() && !t.ExpiresAt.After(t.CreatedAt) {
		return fieldErr("expires_at", "not after created_at")
	}
	if !t.ExpiresAt.IsZero() && t.ExpiresAt.Sub(t.CreatedAt) > MaxACLTokenTTL {
		return fieldErr("ttl", "longer than %s", MaxACLTokenTTL)
	}
	return nil
}

// ACLUser is what an admin has set for one user beyond its tokens.
type ACLUser struct {
	Name string `json:"name"`
	// AllowRoot lets the user's jobs run as root where the user's local
	// account is root. Without it such a job does not start.
	AllowRoot bool      `json:"allow_root,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	UpdatedBy string    `json:"updated_by,omitempty"`
}

// ACLBootstrapRequest turns ACLs on with the first admin token. It is
// committed once; a second one is refused.
type ACLBootstrapRequest struct {
	Token ACLToken  `json:"token"`
	At    time.Time `json:"at"`
}

// ACLTokenRequest creates a token (Revoke false) or revokes the one named
// Token.ID (Revoke true).
type ACLTokenRequest struct {
	Token  ACLToken  `json:"token"`
	Revoke bool      `json:"revoke,omitempty"`
	At     time.Time `json:"at"`
}

// ACLUserRequest sets what an admin allows one user.
type ACLUserRequest struct {
	User ACLUser `json:"user"`
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ErrPermission is wrapped by every refusal for a missing permission.
var ErrPermission = errors.New("permission denied")

// PermissionError is a caller lacking a permission.
type PermissionError struct {
	Role Role
	Need Permission
	What string // what was refused, e.g. "cancel another user's job"
}

func (e *PermissionError) Error() string {
	what := ""
	if e.What != "" {
		what = " to " + e.What
	}
	return fmt.Sprintf("permission denied: role %s lacks %s%s (roles from %s have it)", e.Role, e.Need, what, LeastWith(e.Need))
}

// Unwrap makes a PermissionError an ErrPermission.
func (e *PermissionError) Unwrap() error { return ErrPermission }

// ACLState records that a cluster has ACLs, from its bootstrap on.
type ACLState struct {
	BootstrappedAt time.Time `json:"bootstrapped_at"`
	// BootstrapToken is the ID of the first admin token.
	BootstrapToken string `json:"bootstrap_token"`
}
