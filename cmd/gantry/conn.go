package main

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/config"
)

// serverConn is where the commands that talk to a Gantry server (gantry
// env, gantry infra) send requests. They read GANTRY_SERVER and
// GANTRY_TOKEN themselves rather than loading the server's configuration,
// since the CI machines and laptops they run on have none.
type serverConn struct {
	cli           *cli
	server, token string
	// tokenHint says what token the commands need, completing the error
	// when there is none: "set GANTRY_TOKEN (or --token) to <tokenHint>".
	tokenHint string
}

// addFlags adds --server and --token to cmd; persistent flags reach its
// subcommands too.
func (s *serverConn) addFlags(cmd *cobra.Command, persistent bool) {
	fs := cmd.Flags()
	if persistent {
		fs = cmd.PersistentFlags()
	}
	fs.StringVar(&s.server, "server", "", "Gantry's URL (env GANTRY_SERVER, default GANTRY_BASE_URL)")
	fs.StringVar(&s.token, "token", "", "API token (env GANTRY_TOKEN; prefer the variable, flags show in ps)")
}

// serverURL is the server's address: --server, GANTRY_SERVER,
// GANTRY_BASE_URL or the latter's default. A bad one is named by where it
// came from.
func (s *serverConn) serverURL() (string, error) {
	server, from := s.server, "--server"
	for _, name := range []string{"GANTRY_SERVER", "GANTRY_BASE_URL"} {
		if server == "" {
			server, from = s.cli.getenv(name), name
		}
	}
	if server == "" {
		server, from = defaultOf("GANTRY_BASE_URL"), "GANTRY_BASE_URL's default"
	}
	if u, err := url.Parse(server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		what := fmt.Sprintf("%s=%q", from, server)
		if from == "GANTRY_BASE_URL" {
			what += " (used as GANTRY_SERVER is not set)"
		}
		return "", fmt.Errorf("%s: must be an absolute http:// or https:// URL, such as http://localhost:8080", what)
	}
	return server, nil
}

// tokenClient is a client of the server authenticated with the token.
func (s *serverConn) tokenClient(opts ...client.Option) (*client.Client, error) {
	server, err := s.serverURL()
	if err != nil {
		return nil, err
	}
	token := firstNonEmpty(s.token, s.cli.getenv("GANTRY_TOKEN"))
	if token == "" {
		return nil, errors.New("no API token: set GANTRY_TOKEN (or --token) to " + s.tokenHint)
	}
	opts = append([]client.Option{client.WithToken(token), client.WithUserAgent("gantry-cli")}, opts...)
	return client.New(server, opts...), nil
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// defaultOf is a configuration variable's documented default.
func defaultOf(name string) string {
	for _, v := range config.Vars {
		if v.Name == name {
			return v.Default
		}
	}
	return ""
}
