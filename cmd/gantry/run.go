package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/internal/config"
)

// cli is what every command gets from the outside world, passed explicitly
// so that tests run commands in-process with their own environment.
type cli struct {
	environ []string
	stdout  io.Writer
	stderr  io.Writer
	// flags holds configuration overrides from command-line flags, keyed by
	// the environment variable they override.
	flags map[string]*string
}

// run builds the command tree and executes args.
func run(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) error {
	c := &cli{environ: environ, stdout: stdout, stderr: stderr, flags: map[string]*string{}}
	root := &cobra.Command{
		Use:   "gantry",
		Short: "Gantry, the deployment control plane",
		Long: `Gantry plans and applies infrastructure, leases test environments, runs daemons,
provisions modules and moves releases through pipelines, recording every action
in one append-only deployment log. One binary, one PostgreSQL database.

Start here:  gantry dev          (database, web and workers on http://localhost:8080)
Production:  gantry migrate up, then gantry serve (and gantry worker to scale jobs)

Configuration comes from environment variables (see docs/configuration.md);
flags override them.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// The commands that load Gantry's configuration take the flags that
	// override it; env and infra, which only talk to a server, do not.
	for _, cmd := range []*cobra.Command{c.devCommand(), c.serveCommand(), c.workerCommand(), c.migrateCommand(), c.adminCommand(), c.configCommand()} {
		c.configFlags(cmd)
		root.AddCommand(cmd)
	}
	root.AddCommand(c.infraCommand(), c.envCommand(), c.daemonsCommand(), c.agentCommand(), c.pipelinesCommand(), c.ecsTaskCommand())
	return root.ExecuteContext(ctx)
}

// configFlags adds the flags that override configuration every command
// loading it reads, for cmd and its subcommands.
func (c *cli) configFlags(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(c.flag("DATABASE_URL"), "database-url", "", "PostgreSQL URL (env DATABASE_URL)")
	fs.StringVar(c.flag("GANTRY_CONFIG"), "config", "", "path of gantry.yaml (env GANTRY_CONFIG)")
	fs.StringVar(c.flag("GANTRY_LOG_LEVEL"), "log-level", "", "debug, info, warn or error (env GANTRY_LOG_LEVEL)")
}

// flag returns the override slot for variable name; commands that offer the
// same flag share it, and only the command that runs parses its flags.
func (c *cli) flag(name string) *string {
	if p, ok := c.flags[name]; ok {
		return p
	}
	p := new(string)
	c.flags[name] = p
	return p
}

// config loads the configuration with flags that were set overriding env.
func (c *cli) config() (*config.Config, error) {
	overrides := map[string]string{}
	for name, v := range c.flags {
		if *v != "" {
			overrides[name] = *v
		}
	}
	return config.Load(c.environ, overrides)
}

// getenv reads the command's environment (not the process's: tests pass
// their own).
func (c *cli) getenv(name string) string {
	for _, kv := range c.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

func (c *cli) printf(format string, args ...any) { fmt.Fprintf(c.stdout, format, args...) }

// Every command's -o/--output takes the same words: text for people, json
// for scripts, and a few formats of a command's own (dot, env). "table",
// which gantry env, admin and migrate took before, still means text.
var textOrJSON = []string{"text", "json"}

// outputFlag adds -o/--output taking formats (default: text or json).
func outputFlag(cmd *cobra.Command, formats ...string) *string {
	if len(formats) == 0 {
		formats = textOrJSON
	}
	return cmd.Flags().StringP("output", "o", "text", "output format: "+orList(formats))
}

// checkOutput accepts o when it is one of formats (default: text or
// json), turning the old "table" into "text".
func checkOutput(o *string, formats ...string) error {
	if len(formats) == 0 {
		formats = textOrJSON
	}
	if *o == "table" {
		*o = "text"
	}
	if !slices.Contains(formats, *o) {
		return fmt.Errorf("--output must be %s, not %q", orList(formats), *o)
	}
	return nil
}

// orList is "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

func joinComma(s []string) string { return strings.Join(s, ",") }
