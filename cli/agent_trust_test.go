package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/agent"
)

// agentConfigOf runs `skein args...` with the agent command mapping its
// flags to a configuration instead of starting an agent.
func agentConfigOf(t *testing.T, args ...string) (agent.Config, result) {
	t.Helper()
	var out, errb bytes.Buffer
	app := NewApp(&out, &errb)
	var cfg agent.Config
	for _, cmd := range app.Commands {
		if cmd.Name == "agent" {
			cmd.Action = func(c *ucli.Context) error {
				var err error
				cfg, _, err = agentConfig(c)
				return err
			}
		}
	}
	code := run(app, append([]string{"skein"}, args...))
	return cfg, result{stdout: out.String(), stderr: errb.String(), code: code}
}

func TestAgent_TrustFlagsMapToConfig(t *testing.T) {
	tokenFile := tempFile(t, "token", "api-secret\n")
	joinFile := tempFile(t, "join", "\tskein-join-1 \n")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want func(agent.Config) bool
	}{
		{"defaults", nil, []string{"agent"}, func(c agent.Config) bool {
			return c.Security == agent.SecurityAuto && c.JoinToken == "" && c.Token == "" && c.CertTTL == agent.DefaultCertTTL
		}},
		{"tls", nil, []string{"agent", "--tls"}, func(c agent.Config) bool { return c.Security == agent.SecurityTLS }},
		{"insecure cluster", nil, []string{"agent", "--insecure-cluster"}, func(c agent.Config) bool { return c.Security == agent.SecurityInsecure }},
		{"cert ttl", nil, []string{"agent", "--cert-ttl", "72h"}, func(c agent.Config) bool { return c.CertTTL == 72*time.Hour }},
		{"join token file", nil, []string{"agent", "--join-token-file", joinFile}, func(c agent.Config) bool { return c.JoinToken == "skein-join-1" }},
		{"join token from environment", map[string]string{"SKEIN_JOIN_TOKEN": "skein-join-2\n"}, []string{"agent"}, func(c agent.Config) bool { return c.JoinToken == "skein-join-2" }},
		{"agent token file", nil, []string{"agent", "--token-file", tokenFile}, func(c agent.Config) bool { return c.Token == "api-secret" }},
		{"global token file", nil, []string{"--token-file", tokenFile, "agent"}, func(c agent.Config) bool { return c.Token == "api-secret" }},
		{"token file from environment", map[string]string{"SKEIN_TOKEN_FILE": tokenFile}, []string{"agent"}, func(c agent.Config) bool { return c.Token == "api-secret" }},
		{"global token", nil, []string{"--token", "plain", "agent"}, func(c agent.Config) bool { return c.Token == "plain" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, r := agentConfigOf(t, tc.args...)
			if r.code != exitOK || !tc.want(cfg) {
				t.Fatalf("got code %d, stderr %q, config security %q, join token %q, token %q, cert TTL %s",
					r.code, r.stderr, cfg.Security, cfg.JoinToken, cfg.Token, cfg.CertTTL)
			}
		})
	}
}

func TestAgent_TrustFlagConflictsAreUsageErrors(t *testing.T) {
	tokenFile := tempFile(t, "token", "api-secret")
	joinFile := tempFile(t, "join", "skein-join-1")
	cases := []struct {
		name   string
		env    map[string]string
		args   []string
		stderr string
	}{
		{"tls and insecure cluster", nil, []string{"agent", "--tls", "--insecure-cluster"}, "--tls and --insecure-cluster contradict each other"},
		{"token and token file", nil, []string{"--token", "t", "agent", "--token-file", tokenFile}, "--token (or SKEIN_TOKEN) and --token-file (or SKEIN_TOKEN_FILE) are both set"},
		{"join token twice", map[string]string{"SKEIN_JOIN_TOKEN": "x"}, []string{"agent", "--join-token-file", joinFile}, "--join-token-file and SKEIN_JOIN_TOKEN are both set"},
		{"cert ttl zero", nil, []string{"agent", "--cert-ttl", "0s"}, "--cert-ttl 0s: must be positive"},
		{"join token on the command line", nil, []string{"agent", "--join-token", "x"}, "flag provided but not defined: -join-token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, r := agentConfigOf(t, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want %d and %q", r.code, r.stderr, exitUsage, tc.stderr)
			}
		})
	}
}

// A secret given on the agent's command line, where every local user and
// job reads it in /proc/PID/cmdline, is warned of; from the environment or
// a file it is not.
func TestAgent_SecretsOnTheCommandLineAreWarnedOf(t *testing.T) {
	const warning = "a secret on the command line is readable by every local user and job"
	tokenFile := tempFile(t, "token", "api-secret")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string // "": no warning
	}{
		{"token flag", nil, []string{"--token", "api-secret", "agent"}, "flag=--token use=\"--token-file or SKEIN_TOKEN\""},
		{"encrypt flag", nil, []string{"agent", "--encrypt", "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U="}, "flag=--encrypt use=SKEIN_ENCRYPT"},
		{"token from the environment", map[string]string{"SKEIN_TOKEN": "api-secret"}, []string{"agent"}, ""},
		{"token file", nil, []string{"agent", "--token-file", tokenFile}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, r := agentConfigOf(t, tc.args...)
			if r.code != exitOK {
				t.Fatalf("got code %d, stderr %q", r.code, r.stderr)
			}
			warned := strings.Contains(r.stderr, warning)
			switch {
			case tc.want == "" && warned:
				t.Errorf("warned of a secret given safely: %q", r.stderr)
			case tc.want != "" && (!warned || !strings.Contains(r.stderr, tc.want)):
				t.Errorf("stderr %q, want the warning with %s", r.stderr, tc.want)
			}
		})
	}
}
