package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/structs"
)

// Routes of access control. Every route of the user API needs a
// permission (structs.Permission); a token without it is answered 403 with
// the permission named.
//
//	POST   /v1/acl/bootstrap     turn ACLs on; answers the first admin token
//	GET    /v1/acl/whoami        the caller's user, role and permissions
//	POST   /v1/acl/tokens        create a token (admin)
//	GET    /v1/acl/tokens        list tokens, never their secrets (admin)
//	DELETE /v1/acl/tokens/{id}   revoke a token (admin)
//	GET    /v1/acl/users         what admins allow each user (admin)
//	POST   /v1/acl/users         set it (admin)
//	GET    /v1/audit             the writes users made (admin)

// HiddenValue stands for an environment value the caller may not see: a
// job's env to users other than its owner and operators, and its
// secret_env unless asked for.
const HiddenValue = "(hidden)"

// DefaultBootstrapUser is the user of the bootstrap token when the request
// names none.
const DefaultBootstrapUser = "admin"

// ACLBootstrapRequest is POST /v1/acl/bootstrap.
type ACLBootstrapRequest struct {
	// User is the first admin's user name; "" is DefaultBootstrapUser.
	User string `json:"user,omitempty"`
}

// ACLTokenCreateRequest is POST /v1/acl/tokens.
type ACLTokenCreateRequest struct {
	User string       `json:"user"`
	Role structs.Role `json:"role"`
	// TTL is how long the token works; 0 forever.
	TTL         structs.Duration `json:"ttl,omitempty"`
	Description string           `json:"description,omitempty"`
}

// ACLTokenCreated answers a bootstrap or a token creation: the token as
// its holder uses it (shown this once, never stored) and its record.
type ACLTokenCreated struct {
	Token string       `json:"token"`
	Info  ACLTokenInfo `json:"info"`
}

// Token states in listings.
const (
	TokenActive  = "active"
	TokenExpired = "expired"
	TokenRevoked = "revoked"
)

// ACLTokenInfo is a token as listings show it: its record without the
// secret's hash, and its state.
type ACLTokenInfo struct {
	ID          string       `json:"id"`
	User        string       `json:"user"`
	Role        structs.Role `json:"role"`
	State       string       `json:"state"`
	CreatedBy   string       `json:"created_by,omitempty"`
	Description string       `json:"description,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
	ExpiresAt   time.Time    `json:"expires_at,omitzero"`
	RevokedAt   time.Time    `json:"revoked_at,omitzero"`
}

// TokenInfo is what listings show of a token at now.
func TokenInfo(t *structs.ACLToken, now time.Time) ACLTokenInfo {
	state := TokenActive
	switch {
	case t.Revoked:
		state = TokenRevoked
	case t.Expired(now):
		state = TokenExpired
	}
	return ACLTokenInfo{
		ID: t.ID, User: t.User, Role: t.Role, State: state, CreatedBy: t.CreatedBy,
		Description: t.Description, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt,
	}
}

// ACLUserSetRequest is POST /v1/acl/users.
type ACLUserSetRequest struct {
	User      string `json:"user"`
	AllowRoot bool   `json:"allow_root"`
}

// WhoAmI is GET /v1/acl/whoami.
type WhoAmI struct {
	// ACL is whether the cluster has ACLs; without them every caller
	// with the cluster's token holds every permission and has no user.
	ACL         bool                 `json:"acl"`
	User        string               `json:"user,omitempty"`
	Role        structs.Role         `json:"role"`
	TokenID     string               `json:"token_id,omitempty"`
	Permissions []structs.Permission `json:"permissions"`
}

// AuditRecord is one event of the audit log, as the node that saw it
// recorded it: a write a user made, a sign-in, a failed login, a node's
// admission or refusal, a revocation, a keyring rotation, a read of
// secrets.
type AuditRecord struct {
	At      time.Time    `json:"at"`
	Node    string       `json:"node"`
	User    string       `json:"user"`
	Role    structs.Role `json:"role"`
	TokenID string       `json:"token_id,omitempty"`
	// Remote is the client's address as the node saw it.
	Remote string `json:"remote"`
	Method string `json:"method"`
	Path   string `json:"path"`
	// Status is the HTTP status the node answered.
	Status int `json:"status"`
	// Event is what happened, one of the Audit* events; a record from
	// before events were named has none, and is a write.
	Event string `json:"event,omitempty"`
	// Via is the door it came through: api, ui, ingress or internal (the
	// node-to-node API); none for what a node did by itself.
	Via string `json:"via,omitempty"`
	// Detail says more: why a login or an admission was refused, which
	// node was admitted, which step of a rotation. It never holds a
	// secret.
	Detail string `json:"detail,omitempty"`
}

// The events of the audit log. A dotted name's first part selects its
// family in AuditQuery.Events ("node" selects node.admit, node.refused and
// node.revoke).
const (
	// AuditWrite is any other write a user made through the API (or the
	// UI's actions, which go through it).
	AuditWrite = "write"
	// AuditLogin is a sign-in to the web UI.
	AuditLogin = "login"
	// AuditLoginFailed is a failed authentication at any door: a wrong,
	// revoked or expired token.
	AuditLoginFailed = "login.failed"
	// AuditNodeAdmit is a node admitted with a join token; AuditNodeRefused
	// an admission refused, or a node's certificate refused on the
	// node-to-node API (a revoked node).
	AuditNodeAdmit   = "node.admit"
	AuditNodeRefused = "node.refused"
	// AuditNodeRevoke is a node's admission revoked.
	AuditNodeRevoke = "node.revoke"
	// AuditTokenRevoke is an ACL or join token revoked.
	AuditTokenRevoke = "token.revoke"
	// AuditKeyringRotate is a rotation of the gossip keyring asked for,
	// or a step of one the leader took (after a revocation, by itself).
	AuditKeyringRotate = "keyring.rotate"
	// AuditSecretsRead is a read of a job's or a service's secret_env
	// values (?secrets=true).
	AuditSecretsRead = "secrets.read"
)

// AuditEventMatches reports whether event is selected by filter: the same
// event, or filter is its family (the part before a dot). A record of no
// event is a write.
func AuditEventMatches(event, filter string) bool {
	if event == "" {
		event = AuditWrite
	}
	return event == filter || strings.HasPrefix(event, filter+".")
}

// Audit answers.
const (
	// DefaultAuditLimit is how many records GET /v1/audit answers when
	// the request names no limit, MaxAuditLimit the most it answers.
	DefaultAuditLimit = 100
	MaxAuditLimit     = 10000
	// AuditMissingHeader lists the nodes whose records could not be
	// read, comma-separated.
	AuditMissingHeader = "X-Skein-Audit-Missing"
)

// AuditQuery selects records of GET /v1/audit: the newest Limit, of every
// node unless Local (the answering node's own), of the Events given (any
// when none; AuditEventMatches) and of User when given.
type AuditQuery struct {
	Limit  int
	Local  bool
	Events []string
	User   string
}

// AuditPage is the records answered, oldest first, and the nodes whose
// records are missing from it.
type AuditPage struct {
	Records []AuditRecord
	Missing string
}

// ACLBootstrap turns ACLs on and returns the first admin token.
func (c *Client) ACLBootstrap(ctx context.Context, req ACLBootstrapRequest) (*ACLTokenCreated, error) {
	var out ACLTokenCreated
	return &out, c.do(ctx, http.MethodPost, "/v1/acl/bootstrap", nil, req, &out)
}

// WhoAmI returns who the client's token is.
func (c *Client) WhoAmI(ctx context.Context) (*WhoAmI, error) {
	var out WhoAmI
	return &out, c.do(ctx, http.MethodGet, "/v1/acl/whoami", nil, nil, &out)
}

// CreateACLToken creates a token.
func (c *Client) CreateACLToken(ctx context.Context, req ACLTokenCreateRequest) (*ACLTokenCreated, error) {
	var out ACLTokenCreated
	return &out, c.do(ctx, http.MethodPost, "/v1/acl/tokens", nil, req, &out)
}

// ACLTokens lists the tokens.
func (c *Client) ACLTokens(ctx context.Context) ([]ACLTokenInfo, error) {
	var out []ACLTokenInfo
	return out, c.do(ctx, http.MethodGet, "/v1/acl/tokens", nil, nil, &out)
}

// RevokeACLToken revokes the token with that ID (or unique ID prefix).
func (c *Client) RevokeACLToken(ctx context.Context, id string) (*ACLTokenInfo, error) {
	var out ACLTokenInfo
	return &out, c.do(ctx, http.MethodDelete, "/v1/acl/tokens/"+url.PathEscape(id), nil, nil, &out)
}

// ACLUsers lists what admins allow each user.
func (c *Client) ACLUsers(ctx context.Context) ([]structs.ACLUser, error) {
	var out []structs.ACLUser
	return out, c.do(ctx, http.MethodGet, "/v1/acl/users", nil, nil, &out)
}

// SetACLUser sets what admins allow one user.
func (c *Client) SetACLUser(ctx context.Context, req ACLUserSetRequest) (*structs.ACLUser, error) {
	var out structs.ACLUser
	return &out, c.do(ctx, http.MethodPost, "/v1/acl/users", nil, req, &out)
}

// Audit returns audit records.
func (c *Client) Audit(ctx context.Context, aq AuditQuery) (*AuditPage, error) {
	q := url.Values{}
	if aq.Limit != 0 {
		q.Set("limit", strconv.Itoa(aq.Limit))
	}
	if aq.Local {
		q.Set("local", "true")
	}
	if len(aq.Events) > 0 {
		q.Set("event", strings.Join(aq.Events, ","))
	}
	if aq.User != "" {
		q.Set("user", aq.User)
	}
	var p AuditPage
	h, err := c.doHeader(ctx, sendAny, http.MethodGet, "/v1/audit", q, nil, &p.Records)
	if err != nil {
		return nil, err
	}
	p.Missing = h.Get(AuditMissingHeader)
	return &p, nil
}
