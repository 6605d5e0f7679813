package api

import (
	"context"
	"net/http"

	"github.com/skein-dev/skein/structs"
)

// Accounts returns the account table: accounts, QoS, the users' default
// accounts and the priority weights in force.
func (c *Client) Accounts(ctx context.Context) (*structs.AccountTable, error) {
	var t structs.AccountTable
	return &t, c.do(ctx, http.MethodGet, "/v1/accounts", nil, nil, &t)
}

// SetAccount changes the account tree, a membership or the weights (an
// admin's write) and returns the table as it is now.
func (c *Client) SetAccount(ctx context.Context, req structs.AccountRequest) (*structs.AccountTable, error) {
	var t structs.AccountTable
	return &t, c.do(ctx, http.MethodPost, "/v1/accounts", nil, req, &t)
}

// SetQoS creates, changes or deletes a QoS (an admin's write) and returns
// the table as it is now.
func (c *Client) SetQoS(ctx context.Context, req structs.QoSRequest) (*structs.AccountTable, error) {
	var t structs.AccountTable
	return &t, c.do(ctx, http.MethodPost, "/v1/qos", nil, req, &t)
}
